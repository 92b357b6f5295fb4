"""What a finished run and a sweep call: a run's figures, the comparison of many runs.

Re-exported by the package (`from fedbench.analyze import analyze_run`); see
fedbench/analyze/__init__.py for why the package itself imports nothing.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from matplotlib.figure import Figure

import fedbench.analyze.figures_compare as figures_compare
import fedbench.analyze.figures_devices as figures_devices
import fedbench.analyze.figures_run as figures_run
from fedbench.analyze.report import markdown, tables
from fedbench.analyze.rounds import ROUNDS_SUMMARY_CSV, write_rounds_summary
from fedbench.analyze.runs import (
    Run,
    load_run,
    load_runs,
)
from fedbench.analyze.style import FORMATS, save
from fedbench.analyze.tables import (
    accuracy_per_day,
    flat,
    labels,
    raised_targets,
    run_rows,
    strategy_rows,
    targets,
    write_csv,
)
from fedbench.errors import FedbenchError
from fedbench.report.progress import console

FIGURES_DIR = "figures"
DEFAULT_FRACTION = 0.95
# A run's figures, in the order a reader looks at them: name -> draw(run).
RUN_FIGURES: dict[str, Callable[[Run], Figure | str]] = {
    "accuracy": figures_run.accuracy,
    "accuracy_per_rate": figures_run.accuracy_per_rate,
    "accuracy_vs_time": figures_run.accuracy_vs_time,
    "accuracy_vs_energy": figures_run.accuracy_vs_energy,
    "timeline": figures_devices.timeline,
    "energy_per_device": figures_devices.energy_per_device,
    "thermal": figures_devices.thermal,
    "memory": figures_devices.memory,
    "fairness": figures_run.fairness,
}


def analyze_run(run_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write run_dir/rounds_summary.csv and run_dir/figures/; return the files written.

    A figure a run has no data for (no energy on host devices, no round
    before it failed) is left out and the reason printed.
    """
    run = load_run(run_dir)
    written = [write_rounds_summary(run, run_dir / ROUNDS_SUMMARY_CSV)]
    skipped = []
    for name, draw in RUN_FIGURES.items():
        figure = draw(run)
        if isinstance(figure, str):
            skipped.append(f"{name} ({figure})")
            continue
        written += save(figure, run_dir / FIGURES_DIR / name, formats)
    shown = len(RUN_FIGURES) - len(skipped)
    note = f"; not drawn: {', '.join(skipped)}" if skipped else ""
    console.line(f"{shown} figures -> {run_dir / FIGURES_DIR}{note}")
    return written


def analyze_finished(run_dir: Path) -> None:
    """`analyze_run` at the end of a run: a failure is printed, never raised.

    The analysis reads only the files (as `python -m fedbench.analyze` would
    later); a figure must not turn a finished run into a failed one.
    """
    try:
        analyze_run(run_dir)
    except Exception as exc:
        console.record(traceback.format_exc())
        console.problem(f"analysis of {run_dir} failed: {type(exc).__name__}: {exc}")


def compare(
    run_dirs: Sequence[Path],
    out: Path | None,
    *,
    target_fraction: float = DEFAULT_FRACTION,
    fixed_targets: Mapping[str, float] | None = None,
    target: float | None = None,
    baseline: str | None = "random",
    figures: bool = True,
    formats: Sequence[str] = FORMATS,
    title: str = "Comparison",
) -> str:
    """Compare runs by experiment and strategy; write into `out` (None: nothing), return the table.

    Runs are grouped by experiment (its name; one name with different setups
    is split by what differs) and labelled by strategy; seeds are averaged.
    The target accuracy of an experiment is `fixed_targets[name]`, else
    `target` (every experiment), else `target_fraction` x the best label's
    mean final accuracy.
    """
    if not run_dirs:
        raise FedbenchError("nothing to compare: no run folder (rounds.csv + summary.json)")
    runs = load_runs(list(run_dirs))
    everyone = {r.experiment: target for r in runs} if target is not None else {}
    fixed = {**everyone, **(fixed_targets or {})}
    target_of = targets(runs, target_fraction, fixed)
    raised = raised_targets(runs, target_fraction, fixed)
    for experiment, why in raised.items():
        console.warn(f"{experiment}: {why}")
    how = {
        e: "fixed"
        if e in fixed
        else f"day 0 + {target_fraction:g} x the best gain over it"
        if e in raised
        else f"{target_fraction:g} x the best mean final accuracy"
        for e in target_of
    }
    per_run = run_rows(runs, target_of)
    per_strategy = strategy_rows(per_run)
    if out is None:
        return tables(per_strategy, how, baseline)
    days = accuracy_per_day(runs)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "runs.csv", [asdict(r) for r in per_run])
    write_csv(out / "results.csv", [flat(r) for r in per_strategy])
    write_csv(out / "accuracy_per_day.csv", days)
    named = labels(runs)
    written: dict[str, list[str]] = {}
    for experiment in sorted(target_of) if figures else []:
        mine = [r for r in runs if r.experiment == experiment]
        rows = [r for r in per_strategy if r.experiment == experiment]
        target = target_of[experiment]
        drawn = {
            "accuracy_vs_time": figures_compare.accuracy_curves(mine, named, "time_s", target),
            "accuracy_vs_energy": figures_compare.accuracy_curves(mine, named, "energy_j", target),
            "accuracy_vs_step": figures_compare.accuracy_curves(mine, named, "step", target),
            "to_target": figures_compare.to_target(rows),
            "selection": figures_compare.selection_heatmaps(mine, named),
        }
        for kind, figure in drawn.items():
            if isinstance(figure, str):
                console.line(f"{experiment}: {kind} not drawn ({figure})")
                continue
            stem = out / f"{_file_safe(experiment)}_{kind}"
            save(figure, stem, formats)
            written.setdefault(experiment, []).append(f"{stem.name}.png")
    incomplete = [
        f"{r.experiment} {named[r.path]} seed {r.seed}: {r.status} ({r.path.name})"
        for r in runs
        if r.status != "completed"
    ]
    (out / "results.md").write_text(
        markdown(per_strategy, days, how, written, baseline, incomplete, title)
    )
    return tables(per_strategy, how, baseline)


def _file_safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in name)
