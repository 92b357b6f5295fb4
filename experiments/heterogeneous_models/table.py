"""The study's table per arm, mean +- sd over seeds (one scenario on one fleet).

    python experiments/heterogeneous_models/table.py FOLDER [target=ACCURACY]

FOLDER is one scenario on one fleet as run.sh writes it
(RUNS_DIR/<scenario>_<fleet>/<arm>/<seed>/). `python -m fedbench.analyze`
computes the same figures per run but labels a run by its configuration
(`random [heterofl, algorithm.rate_policy=deadline, deadline]`); this groups
the runs by their arm folder instead, so the README's rows are run.sh's arms.

The target accuracy is fedbench.analyze's default, target_fraction x the
best arm's mean final accuracy (`target=0.9` fixes it). A fixed-rate run's
accuracy is its submodel's; a submodel run's best rate is the rate whose
submodel ends highest (mean over seeds), with that accuracy. Time and energy
to the target average the seeds that reached it; timeouts are per seed. A run
that did not complete (still running, failed, interrupted) is left out and
named on stderr: a half-run seed must not pull an arm's mean.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fedbench.analyze.runs import Run, find_run_dirs, load_runs  # noqa: E402
from fedbench.analyze.style import rate_label  # noqa: E402
from fedbench.analyze.tables import RunRow, mean_std, run_rows, targets  # noqa: E402

TARGET_FRACTION = 0.95
HEADER = (
    "| arm | seeds | final acc. (%) | best rate: acc. (%) | reached | rounds to target"
    " | virtual s to target | J to target | total J | timeouts per seed |"
)


def arm_of(run: Run, folder: Path) -> str:
    """The arm folder (FOLDER/<arm>/<seed>/): the first part of the run's path below FOLDER."""
    return run.path.resolve().relative_to(folder.resolve()).parts[0]


def _pm(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    mean, sd = mean_std(values)
    if math.isnan(mean):
        return "-"
    text = f"{scale * mean:.{digits}f}"
    return text if math.isnan(sd) else f"{text} ± {scale * sd:.{digits}f}"


def best_rate(runs: list[Run]) -> str:
    """`1/4: 93.0` - the rate whose submodel ends highest, mean over the seeds ("" for FedAvg)."""
    finals: dict[float, list[float]] = defaultdict(list)
    for run in runs:
        if run.accuracy_per_rate:
            for rate, accuracy in run.accuracy_per_rate[max(run.accuracy_per_rate)].items():
                finals[rate].append(accuracy)
    if not finals:
        return ""
    rate, accuracies = max(finals.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
    return f"{rate_label(rate)}: {100 * sum(accuracies) / len(accuracies):.1f}"


def rows(folder: Path, target: float | None = None) -> tuple[float, list[str]]:
    """The target accuracy and one markdown row per arm (completed runs only)."""
    loaded = load_runs(find_run_dirs([folder]))
    runs = [run for run in loaded if run.status == "completed"]
    for run in loaded:
        if run.status != "completed":
            print(f"table.py: left out {run.path} ({run.status})", file=sys.stderr)
    if not runs:
        raise ValueError(f"{folder}: no completed run folder under it")
    experiments = {run.experiment for run in runs}
    if len(experiments) > 1:
        raise ValueError(f"{folder}: runs of {len(experiments)} setups {sorted(experiments)}")
    (experiment,) = experiments
    target_of = {experiment: target} if target is not None else targets(runs, TARGET_FRACTION)
    by_arm: dict[str, list[tuple[Run, RunRow]]] = defaultdict(list)
    for run in runs:
        (row,) = run_rows([run], target_of)
        by_arm[arm_of(run, folder)].append((run, row))
    lines = []
    for arm, members in sorted(by_arm.items()):
        figures = [row for _, row in members]
        reached = [row for row in figures if row.reached]
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{arm}`",
                    str(len(figures)),
                    _pm([r.final_accuracy for r in figures], 100),
                    best_rate([run for run, _ in members]),
                    f"{len(reached)}/{len(figures)}",
                    _pm([r.round_to_target for r in reached], digits=0),
                    _pm([r.time_to_target_s for r in reached]),
                    _pm([r.energy_to_target_j for r in reached], digits=0),
                    _pm([r.total_energy_j for r in figures], digits=0),
                    _pm([float(r.timeout) for r in figures], digits=0),
                ]
            )
            + " |"
        )
    return target_of[experiment], lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    folders = [Path(a) for a in args if "=" not in a]
    keys = dict(a.split("=", 1) for a in args if "=" in a)
    unknown = sorted(set(keys) - {"target"})
    if len(folders) != 1 or unknown:
        why = f"unknown key {unknown[0]} (takes target=)" if unknown else "one FOLDER"
        print(f"table.py: {why}; usage: {__doc__.splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        target = float(keys["target"]) if "target" in keys else None
        reach, lines = rows(folders[0], target)
    except ValueError as exc:
        print(f"table.py: {exc}", file=sys.stderr)
        return 2
    print(f"{folders[0].name}: target accuracy {100 * reach:.1f}%\n")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
