"""Figures and tables of fedbench runs: one run's folder, or many runs side by side.

    python -m fedbench.analyze outputs/2025-01-01/12-00-00          # one run
    python -m fedbench.analyze multirun/2025-01-01/12-00-00         # a sweep: compare its runs

`analyze_run(run_dir)` writes a run's figures (figures/*.png and .pdf) and
rounds_summary.csv into its folder; every run calls it when it finishes.
`compare(run_dirs, out)` writes the side-by-side figures, results.md/.csv,
runs.csv and accuracy_per_day.csv into `out` and returns the comparison
table; a multirun calls it for its sweep folder. docs/results.md explains
every file and column.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedbench.analyze.api import (
        DEFAULT_FRACTION,
        FIGURES_DIR,
        RUN_FIGURES,
        analyze_finished,
        analyze_run,
        compare,
    )
    from fedbench.analyze.rounds import (
        ROUNDS_SUMMARY_CSV,
        rounds_summary,
    )
    from fedbench.analyze.runs import (
        Run,
        find_run_dirs,
        is_run_dir,
        jain_index,
        load_run,
        load_runs,
        participation_fairness,
        time_to_target,
    )

# The package imports nothing until a name is asked for (PEP 562). Every run's
# driver imports fedbench.analyze.sweep at start (Hydra's sweep callback), and
# the figures' matplotlib would then sit in the driver for the whole run: 33 MB
# of the process tree's peak at 100,000 devices (benchmarks/scale.py), before
# any figure is drawn.
__all__ = [
    "DEFAULT_FRACTION",
    "FIGURES_DIR",
    "ROUNDS_SUMMARY_CSV",
    "RUN_FIGURES",
    "Run",
    "analyze_finished",
    "analyze_run",
    "compare",
    "find_run_dirs",
    "is_run_dir",
    "jain_index",
    "load_run",
    "load_runs",
    "participation_fairness",
    "rounds_summary",
    "time_to_target",
]
_API = {
    "DEFAULT_FRACTION",
    "FIGURES_DIR",
    "RUN_FIGURES",
    "analyze_finished",
    "analyze_run",
    "compare",
}
_ROUNDS = {"ROUNDS_SUMMARY_CSV", "rounds_summary"}


def _home(name: str) -> str:
    """The module of this package that defines `name` (runs.py: the rest of __all__)."""
    return "api" if name in _API else "rounds" if name in _ROUNDS else "runs"


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_home(name)}"), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value
