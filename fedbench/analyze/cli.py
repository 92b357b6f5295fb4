"""`python -m fedbench.analyze <run folders, sweep folders or globs> [key=value ...]`.

One run folder: its figures and rounds_summary.csv (into the folder, if not
there yet) and its line of the table, printed. Several runs (a sweep,
several sweeps, globs): each run's figures where missing, then the
comparison into `out` (default: <the one folder given>/analysis, or
<the deepest folder holding every run>/analysis) and the table printed;
either way the path is printed.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from fedbench.analyze import (
    DEFAULT_FRACTION,
    FIGURES_DIR,
    ROUNDS_SUMMARY_CSV,
    analyze_run,
    compare,
    find_run_dirs,
)
from fedbench.analyze.style import FORMATS
from fedbench.cli.grammar import Grammar, Key, parse_bool, parse_float
from fedbench.errors import FedbenchError
from fedbench.folders import check_folder
from fedbench.report.progress import console

ANALYSIS_DIR = "analysis"
GRAMMAR = Grammar(
    prog="python -m fedbench.analyze",
    summary="Figures and tables of fedbench runs: one run, or many side by side.",
    positional="PATH",
    positional_help="run folders, sweep folders (every run under them) or globs",
    keys=(
        Key(
            "out",
            "folder for the comparison (unset: <the folder given>/analysis, "
            "or <the deepest folder holding every run>/analysis)",
        ),
        Key("target", "target accuracy in (0, 1] for every experiment (unset: target_fraction)"),
        Key("target.NAME", "target accuracy of experiment NAME, e.g. target.study_daily=0.9"),
        Key(
            "target_fraction",
            "unset targets: this x the best mean final accuracy",
            str(DEFAULT_FRACTION),
        ),
        Key(
            "baseline",
            "strategy the time and energy ratios compare with (none: no ratios)",
            "random",
        ),
        Key("figures", "draw the figures (false: tables only)", "true", flag=True),
        Key(
            "per_run",
            "redo every run's own figures and rounds_summary.csv (else: where missing)",
            "false",
            flag=True,
        ),
        Key("formats", "figure file formats, comma-separated", ",".join(FORMATS)),
        Key("title", "the heading of results.md", "Comparison"),
    ),
    examples=(
        "python -m fedbench.analyze outputs/2025-01-01/12-00-00",
        "python -m fedbench.analyze multirun/2025-01-01/12-00-00 target=0.9",
        "python -m fedbench.analyze 'multirun/*/*' out=paper/figures target.study_daily=0.9",
    ),
    aliases={"hydra.run.dir": "out"},
)


def expand(paths: Sequence[str]) -> list[Path]:
    """Paths and globs -> folders; a path that names nothing is an error."""
    if not paths:
        raise FedbenchError(
            f"no run folder given; e.g. {GRAMMAR.examples[0]} (all keys: {GRAMMAR.prog} --help)"
        )
    out: list[Path] = []
    for item in paths:
        matches = sorted(glob.glob(item)) if glob.has_magic(item) else [item]
        if not matches or not Path(matches[0]).exists():
            raise FedbenchError(f"{item}: no such folder (nor a glob that matches one)")
        out += [Path(m) for m in matches]
    return out


def beside(roots: Sequence[Path], dirs: Sequence[Path]) -> Path:
    """Where a comparison goes unless out= says: next to the runs, not the current directory.

    One folder given (a sweep): <it>/analysis; several (`analyze A B`, a glob):
    <the deepest folder holding every run>/analysis.
    """
    if len(roots) == 1 and roots[0].is_dir():
        return roots[0] / ANALYSIS_DIR
    return Path(os.path.commonpath([d.resolve() for d in dirs])) / ANALYSIS_DIR


def _target(raw: str, key: str) -> float:
    value = parse_float(key, raw)
    if not 0.0 < value <= 1.0:
        raise FedbenchError(f"{key}={raw}: expected an accuracy in (0, 1], e.g. 0.9 for 90%")
    return value


def run(argv: Sequence[str]) -> str:
    args = GRAMMAR.parse(argv)
    roots = expand(args.positional)
    dirs = find_run_dirs(roots)
    if not dirs:
        raise FedbenchError(
            f"no run folder (rounds.csv + summary.json) under {', '.join(map(str, roots))}"
        )
    fraction = _target(args.get("target_fraction", str(DEFAULT_FRACTION)) or "", "target_fraction")
    fixed = {k: _target(v, f"target.{k}") for k, v in args.with_prefix("target").items()}
    formats = tuple(f.strip() for f in (args.get("formats") or ",".join(FORMATS)).split(","))
    redo = parse_bool("per_run", args.get("per_run", "false") or "false")
    draw = parse_bool("figures", args.get("figures", "true") or "true")
    if "out" in args:  # before any run's figures: a file there is refused, not a traceback
        check_folder("out", args["out"])
    for run_dir in dirs:
        missing = (
            not (run_dir / ROUNDS_SUMMARY_CSV).is_file() or not (run_dir / FIGURES_DIR).is_dir()
        )
        if redo or (draw and missing):
            analyze_run(run_dir, formats)
    out: Path | None
    if "out" in args:
        out = Path(args["out"])
    elif len(dirs) == 1:  # one run: its figures are in its folder; the table is printed
        out = None
    else:
        out = beside(roots, dirs)
    baseline = args.get("baseline", "random")
    table = compare(
        dirs,
        out,
        target_fraction=fraction,
        fixed_targets=fixed,
        target=_target(args["target"], "target") if "target" in args else None,
        baseline=None if baseline in (None, "", "none") else baseline,
        figures=draw and len(dirs) > 1,
        formats=formats,
        title=args.get("title") or "Comparison",
    )
    if out is not None:
        console.line(f"{len(dirs)} runs compared -> {out}")
    else:
        console.line(f"{dirs[0]}: figures -> {dirs[0] / FIGURES_DIR}")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    return GRAMMAR.main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
