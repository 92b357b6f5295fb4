"""Analyse strategy-study sweeps: `python experiments/strategy_study/analyze.py SWEEP_DIR...`

Reads every run folder under the given directories (Hydra multirun sweeps,
single runs, or copies), groups them by experiment and strategy from their
config.yaml, and writes into the output folder (default: next to this file,
results/):

- results.csv / results.md: per experiment and strategy, mean +- std over
  seeds of virtual time and energy to the target accuracy (and how many
  seeds reached it), final accuracy, total time and energy, Jain's index of
  participation, and the oom/dropped/timeout/failed report counts;
- runs.csv: the same figures per run; accuracy_per_day.csv;
- <experiment>_accuracy_vs_time.png, <experiment>_accuracy_vs_energy.png,
  <experiment>_selection.png.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.strategy_study import plots  # noqa: E402
from experiments.strategy_study.report import markdown  # noqa: E402
from experiments.strategy_study.runs import Run, find_run_dirs, load_runs  # noqa: E402
from experiments.strategy_study.tables import (  # noqa: E402
    accuracy_per_day,
    flat,
    labels,
    run_rows,
    strategy_rows,
    targets,
    write_csv,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
DEFAULT_FRACTION = 0.95


def parse_targets(items: list[str]) -> dict[str, float]:
    fixed = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            accuracy = float(value)
        except ValueError:
            accuracy = -1.0
        if not sep or not 0.0 < accuracy <= 1.0:
            raise SystemExit(
                f"analyze.py: --target {item!r}: expected EXPERIMENT=ACCURACY with the "
                f"accuracy in (0, 1], e.g. study_daily=0.9"
            )
        fixed[name] = accuracy
    return fixed


def analyse(
    roots: list[Path],
    out: Path,
    fraction: float = DEFAULT_FRACTION,
    fixed: dict[str, float] | None = None,
    baseline: str | None = "random",
    figures: bool = True,
) -> list[Run]:
    """Load the runs under `roots` and write the tables (and figures) into `out`."""
    dirs = find_run_dirs(roots)
    if not dirs:
        raise SystemExit(
            f"analyze.py: no run folder (config.yaml + rounds.csv + summary.json) under "
            f"{', '.join(map(str, roots))}"
        )
    runs = load_runs(dirs)
    fixed = fixed or {}
    target_of = targets(runs, fraction, fixed)
    how = {
        e: "fixed" if e in fixed else f"{fraction:g} x the best strategy's mean final accuracy"
        for e in target_of
    }
    per_run = run_rows(runs, target_of)
    per_strategy = strategy_rows(per_run)
    days = accuracy_per_day(runs)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "runs.csv", [asdict(r) for r in per_run])
    write_csv(out / "results.csv", [flat(r) for r in per_strategy])
    write_csv(out / "accuracy_per_day.csv", days)
    named = labels(runs)
    written: dict[str, list[str]] = {}
    for experiment in sorted(target_of):
        mine = [r for r in runs if r.experiment == experiment]
        if not figures:
            continue
        names = [f"{experiment}_{k}.png" for k in ("accuracy_vs_time", "accuracy_vs_energy")]
        plots.accuracy_curves(mine, named, "time_s", target_of[experiment], out / names[0])
        plots.accuracy_curves(mine, named, "energy_j", target_of[experiment], out / names[1])
        names.append(f"{experiment}_selection.png")
        plots.selection_heatmaps(mine, named, out / names[2])
        written[experiment] = names
    incomplete = [
        f"{r.experiment} {named[r.path]} seed {r.seed}: {r.status} ({r.path.name})"
        for r in runs
        if r.status != "completed"
    ]
    (out / "results.md").write_text(
        markdown(per_strategy, days, how, written, baseline, incomplete)
    )
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep or run folders")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument(
        "--target-fraction",
        type=float,
        default=DEFAULT_FRACTION,
        help="target = this x the best strategy's mean final accuracy (default %(default)s)",
    )
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="EXPERIMENT=ACC",
        help="a fixed target accuracy for one experiment (repeatable), e.g. study_daily=0.9",
    )
    parser.add_argument(
        "--baseline", default="random", help="strategy the ratios compare with ('' for none)"
    )
    parser.add_argument("--no-figures", action="store_true", help="tables only")
    args = parser.parse_args(argv)
    if not 0.0 < args.target_fraction <= 1.0:
        parser.error(f"--target-fraction must be in (0, 1], got {args.target_fraction}")
    runs = analyse(
        args.sweeps,
        args.out,
        args.target_fraction,
        parse_targets(args.target),
        args.baseline or None,
        not args.no_figures,
    )
    print(f"{len(runs)} runs -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
