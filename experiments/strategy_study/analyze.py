"""The strategy study's analysis: `python experiments/strategy_study/analyze.py SWEEP... [k=v]`.

`python -m fedbench.analyze` with the study's defaults: the tables and
figures go to results/ next to this file, titled for the study. Every key
of `python -m fedbench.analyze --help` works here too (e.g.
`target_fraction=0.9 figures=false out=...`, `target.study_daily=0.9`).
Per experiment and strategy it writes mean +- sd over seeds of virtual time
and energy to the target accuracy (and how many seeds reached it), final
accuracy, total time and energy, Jain's index of participation and the
oom/dropped/timeout/failed report counts (results.md, results.csv), the
same per run (runs.csv), accuracy per day, and the figures.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fedbench.analyze.cli import main as analyze  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
TITLE = "Strategy study: results"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    keys = {a.partition("=")[0] for a in args if "=" in a}
    defaults = [f"out={DEFAULT_OUT}"] if "out" not in keys else []
    defaults += [f"title={TITLE}"] if "title" not in keys else []
    return analyze([*args, *defaults])


if __name__ == "__main__":
    sys.exit(main())
