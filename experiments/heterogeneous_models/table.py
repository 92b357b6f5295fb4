"""The study's table per arm, mean +- sd over seeds (one scenario on one fleet).

    python experiments/heterogeneous_models/table.py FOLDER [target=0.9] [figure=OUT] [seeds=0,1]

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
named on stderr: a half-run seed must not pull an arm's mean. `seeds=0,1`
keeps only those seeds (every arm on the same seeds while a study is still
running). `figure=` draws final accuracy and virtual time and energy to the
target per arm.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fedbench.analyze.runs import Run, find_run_dirs, load_runs, number  # noqa: E402
from fedbench.analyze.style import rate_label  # noqa: E402
from fedbench.analyze.tables import RunRow, mean_std, run_rows, targets  # noqa: E402

TARGET_FRACTION = 0.95
USAGE = "python experiments/heterogeneous_models/table.py FOLDER [target=] [figure=] [seeds=]"
# One colour per algorithm family (Okabe-Ito, as fedbench.analyze.style's arm colours).
FAMILY_COLOURS = {
    "fedavg": "#555555",
    "heterofl": "#0072b2",
    "fjord": "#009e73",
    "fedrolex": "#d55e00",
}
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


def trained_rates(run: Run) -> set[float]:
    """The width rates the run's devices trained at (rounds.csv `model_rate`)."""
    return {r for r in (number(row.get("model_rate")) for row in run.rows) if not math.isnan(r)}


def best_rate(runs: list[Run]) -> str:
    """`1/4: 93.0` - the rate whose submodel ends highest, mean over the seeds ("" for FedAvg).

    Only rates up to the widest any device trained: a wider submodel of a
    fixed-rate run adds channels nobody trained, and can score a hair above
    the trained one by chance (edge_mixed's 1/16 runs at 1/8).
    """
    finals: dict[float, list[float]] = defaultdict(list)
    for run in runs:
        if run.accuracy_per_rate:
            widest = max(trained_rates(run), default=1.0)
            for rate, accuracy in run.accuracy_per_rate[max(run.accuracy_per_rate)].items():
                if rate <= widest:
                    finals[rate].append(accuracy)
    if not finals:
        return ""
    rate, accuracies = max(finals.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
    return f"{rate_label(rate)}: {100 * sum(accuracies) / len(accuracies):.1f}"


@dataclass(frozen=True)
class Arm:
    """One arm's completed runs and their figures (fedbench.analyze's per-run row)."""

    name: str
    runs: tuple[Run, ...]
    rows: tuple[RunRow, ...]

    @property
    def reached(self) -> list[RunRow]:
        return [row for row in self.rows if row.reached]

    def markdown(self) -> str:
        rows, reached = self.rows, self.reached
        cells = [
            f"`{self.name}`",
            str(len(rows)),
            _pm([r.final_accuracy for r in rows], 100),
            best_rate(list(self.runs)),
            f"{len(reached)}/{len(rows)}",
            _pm([r.round_to_target for r in reached], digits=0),
            _pm([r.time_to_target_s for r in reached]),
            _pm([r.energy_to_target_j for r in reached], digits=0),
            _pm([r.total_energy_j for r in rows], digits=0),
            _pm([float(r.timeout) for r in rows], digits=0),
        ]
        return "| " + " | ".join(cells) + " |"


def arms(
    folder: Path, target: float | None = None, seeds: set[int] | None = None
) -> tuple[float, list[Arm]]:
    """The target accuracy and each arm's completed runs (of `seeds`: all), by arm name."""
    loaded = load_runs(find_run_dirs([folder]))
    loaded = [run for run in loaded if seeds is None or run.seed in seeds]
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
    out = [
        Arm(name, tuple(r for r, _ in members), tuple(row for _, row in members))
        for name, members in sorted(by_arm.items())
    ]
    return target_of[experiment], out


def draw(found: list[Arm], target: float, title: str, out: Path) -> None:
    """Final accuracy, virtual time and energy to the target per arm, mean and sd over seeds.

    Time and energy average the seeds that reached the target (`reached` on the
    bar); an arm none of whose seeds reached it gets no bar, and says so.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    panels = (
        ("final test accuracy (%)", lambda a: [100 * r.final_accuracy for r in a.rows], False),
        ("virtual s to target", lambda a: [r.time_to_target_s for r in a.reached], True),
        ("J to target (log)", lambda a: [r.energy_to_target_j for r in a.reached], True),
    )
    fig, axes = plt.subplots(1, 3, figsize=(11, 0.42 * len(found) + 1.6), sharey=True)
    ys = range(len(found))
    for ax, (label, values, to_target) in zip(axes, panels, strict=True):
        for y, arm in zip(ys, found, strict=True):
            mean, sd = mean_std(values(arm))
            colour = FAMILY_COLOURS.get(arm.name.split("_")[0], "#555555")
            if math.isnan(mean):
                ax.text(0.02, y, "target not reached", transform=ax.get_yaxis_transform(),
                        va="center", fontsize=7, color="#555555")  # fmt: skip
                continue
            ax.barh(y, mean, xerr=0 if math.isnan(sd) else sd, color=colour,
                    hatch="//" if arm.name.endswith("_budget") else None, edgecolor="white",
                    error_kw={"elinewidth": 0.8, "capsize": 2})  # fmt: skip
            if to_target:  # right of the error bar: how many seeds the bar averages
                end = mean + (0 if math.isnan(sd) else sd)
                ax.text(end, y, f" {len(arm.reached)}/{len(arm.rows)}", va="center", fontsize=6)
        ax.set_xlabel(label, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[2].set_xscale("log")
    axes[2].xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes[2].xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    axes[2].xaxis.set_minor_formatter(ticker.NullFormatter())
    lowest = min(100 * r.final_accuracy for a in found for r in a.rows)
    axes[0].set_xlim(max(0.0, lowest - 10), 100)
    axes[0].axvline(100 * target, color="#555555", lw=0.8, ls="--")
    axes[0].set_yticks(list(ys), [arm.name for arm in found])
    axes[0].invert_yaxis()
    fig.suptitle(
        f"{title}: mean ± sd over seeds; target {100 * target:.1f}% (dashed); "
        "time and energy over the seeds that reached it (n/seeds); hatched: rate by budget",
        fontsize=8,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    folders = [Path(a) for a in args if "=" not in a]
    keys = dict(a.split("=", 1) for a in args if "=" in a)
    unknown = sorted(set(keys) - {"target", "figure", "seeds"})
    if len(folders) != 1 or unknown:
        why = (
            f"unknown key {unknown[0]} (takes target=, figure=, seeds=)"
            if unknown
            else "one FOLDER"
        )
        print(f"table.py: {why}; usage: {USAGE}", file=sys.stderr)
        return 2
    try:
        target = _target(keys.get("target"))
        reach, found = arms(folders[0], target, _seeds(keys.get("seeds")))
    except ValueError as exc:
        print(f"table.py: {exc}", file=sys.stderr)
        return 2
    print(f"{folders[0].name}: target accuracy {100 * reach:.1f}%\n")
    daily = any(run.by_day for arm in found for run in arm.runs)
    header = HEADER.replace("rounds to target", "days to target") if daily else HEADER
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    print("\n".join(arm.markdown() for arm in found))
    if "figure" in keys:
        draw(found, reach, folders[0].name, Path(keys["figure"]))
        print(f"-> {keys['figure']}")
    return 0


def _seeds(text: str | None) -> set[int] | None:
    if text is None:
        return None
    try:
        return {int(seed) for seed in text.split(",")}
    except ValueError:
        raise ValueError(f"seeds={text}: integers separated by commas, e.g. seeds=0,1") from None


def _target(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise ValueError(f"target={text}: an accuracy in (0, 1], e.g. target=0.9")
    return value


if __name__ == "__main__":
    sys.exit(main())
