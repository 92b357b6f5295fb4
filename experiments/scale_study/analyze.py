"""The scale study's analysis: `python experiments/scale_study/analyze.py RUNS [out=DIR] [k=v]`.

RUNS is run.sh's OUT: RUNS/<experiment>/<arm>/seed<N>/ run folders (with
seed<N>.cpu.json beside each). Comparisons, each an arm against its baseline
on the same seeds:

- study_shakespeare: oort and pow_d against random;
- study_shakespeare_async: fedbuff against sync, where sync is no run of its
  own but study_shakespeare's random run of the seed read up to FedBuff's
  virtual-time budget (hooks.budget.virtual_time_s of the async config): its
  rounds until the one in which the clock passes the budget, which is what a
  synchronous run stopped by that budget does (its picks never depend on it).

For every seed both arms ran it pairs the two runs and computes the ratio
arm / baseline of virtual time to the target accuracy, of energy to it and of
device updates to it (FedBuff's paper counts updates), and the difference
arm - baseline of the final test accuracy (points: the last evaluation).
Over the seeds: a 95% paired t-interval on the log of each ratio
(exponentiated: a geometric-mean ratio and its interval) and a t-interval on
the accuracy difference (n - 1 degrees of freedom). A seed where either run
missed the target gives no ratio; the table says how many seeds gave one.
Each experiment's target is read from its config,
fedbench/conf/experiment/<experiment>.yaml (the line `Study target accuracy
...: X`), fixed before the runs; `target.<experiment>=X` overrides it (for a
pilot only). Writes OUT/results.md, results.csv (one row per comparison and
metric), runs.csv (one row per run, small enough to commit) and the figures
(accuracy against virtual time per arm, every seed and their mean; the
ratios with their intervals). Default OUT: results/ beside this file.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import matplotlib  # noqa: E402
import yaml  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402
from scipy import stats  # noqa: E402

from fedbench.analyze.runs import Run, load_run, time_to_target  # noqa: E402
from fedbench.paths import conf_dir  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results"
# experiment -> (baseline arm, the arms compared with it), in table order.
COMPARISONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "study_shakespeare": ("random", ("oort", "pow_d")),
    "study_shakespeare_async": ("sync", ("fedbuff",)),
}
ARM_LABELS = {
    "random": "random",
    "oort": "Oort",
    "pow_d": "power-of-choice (pow-d)",
    "sync": "synchronous FedAvg",
    "fedbuff": "FedBuff",
}
METRIC_LABELS = {
    "time_to_target": "time to target",
    "energy_to_target": "energy to target",
    "updates_to_target": "updates to target",
    "run_time": "whole run, virtual time",
    "run_energy": "whole run, energy",
}
TARGET_LINE = re.compile(r"^#\s*Study target accuracy[^:]*:\s*([0-9.]+)\s*$")
USAGE = "python experiments/scale_study/analyze.py RUNS [out=DIR] [target.EXPERIMENT=X]"


@dataclass(frozen=True)
class RunFacts:
    """One run, as runs.csv has it."""

    experiment: str
    arm: str
    seed: int
    status: str
    target: float
    reached: bool
    rounds_to_target: float
    time_to_target_s: float
    energy_to_target_j: float
    updates_to_target: float
    final_accuracy: float
    best_accuracy: float
    rounds: int
    virtual_time_s: float
    energy_j: float
    updates: int
    mean_round_s: float
    distinct_devices: int
    mean_examples_per_update: float
    timeouts_or_dropped: int
    cpu_s: float
    wall_s: float
    commit: str


@dataclass
class Comparison:
    """One arm against its baseline, one metric, over the paired seeds."""

    experiment: str
    arm: str
    baseline: str
    metric: str  # time_to_target | energy_to_target | updates_to_target | final_accuracy
    kind: str  # ratio | difference
    seeds: int  # seeds both arms ran
    paired: int  # seeds that gave a value
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    values: list[float] = field(default_factory=list)


def study_target(experiment: str) -> float:
    """The target accuracy fixed in fedbench/conf/experiment/<experiment>.yaml."""
    path = conf_dir() / "experiment" / f"{experiment}.yaml"
    for line in path.read_text().splitlines():
        match = TARGET_LINE.match(line)
        if match:
            return float(match.group(1))
    raise SystemExit(f"{path}: no 'Study target accuracy ...: X' line")


def study_budget_s(experiment: str = "study_shakespeare_async") -> float:
    """FedBuff's virtual-time budget, from its config (hooks.budget.virtual_time_s)."""
    path = conf_dir() / "experiment" / f"{experiment}.yaml"
    return float(yaml.safe_load(path.read_text())["hooks"]["budget"]["virtual_time_s"])


def up_to_budget(run: Run, budget_s: float) -> tuple[Run, bool]:
    """The run's rounds up to the one in which its clock passes `budget_s`, and whether it
    got there (False: the whole run, which ended before the budget)."""
    clock = np.cumsum(run.durations)
    passed = np.flatnonzero(clock >= budget_s)
    if not len(passed):
        return run, False
    last = int(passed[0])
    rows = tuple(r for r in run.rows if int(r["round"]) <= last)
    energy = np.nan_to_num(run.round_energy[: last + 1])
    cut = dataclasses.replace(
        run,
        evaluations=tuple(e for e in run.evaluations if e.round <= last),
        rows=rows,
        durations=run.durations[: last + 1],
        round_energy=run.round_energy[: last + 1],
        total_time_s=float(clock[last]),
        total_energy_j=float(energy.sum()),
        selections=dict(Counter(r["device"] for r in rows)),
        status_counts={s: sum(r.get("status") == s for r in rows) for s in run.status_counts},
    )
    return cut, True


def ok_updates(run: Run) -> np.ndarray:
    """Successful updates per round (index = round; round 0 has none)."""
    counts = np.zeros(len(run.durations), dtype=np.int64)
    for row in run.rows:
        if row.get("status") == "ok":
            counts[int(row["round"])] += 1
    return counts


def facts(run: Run, experiment: str, arm: str, target: float) -> RunFacts:
    reached = time_to_target(run, target)
    updates = np.cumsum(ok_updates(run))
    evaluation = reached.evaluation
    cpu = _read_cpu(run.path)
    examples = [float(r["num_examples"]) for r in run.rows if r.get("status") == "ok"]
    rounds = run.rounds
    return RunFacts(
        experiment=experiment,
        arm=arm,
        seed=run.seed,
        status=run.status,
        target=target,
        reached=reached.reached,
        rounds_to_target=float(evaluation.round) if evaluation else math.nan,
        time_to_target_s=reached.time_s,
        energy_to_target_j=reached.energy_j,
        updates_to_target=float(updates[evaluation.round]) if evaluation else math.nan,
        final_accuracy=run.final_accuracy,
        best_accuracy=max((e.accuracy for e in run.evaluations), default=math.nan),
        rounds=rounds,
        virtual_time_s=run.total_time_s,
        energy_j=run.total_energy_j,
        updates=int(updates[-1]),
        mean_round_s=float(np.mean(run.durations[1:])) if rounds else math.nan,
        distinct_devices=sum(1 for n in run.selections.values() if n > 0),
        mean_examples_per_update=float(np.mean(examples)) if examples else math.nan,
        timeouts_or_dropped=run.status_counts.get("timeout", 0)
        + run.status_counts.get("dropped", 0),
        cpu_s=float(cpu.get("cpu_s", math.nan)),
        wall_s=float(cpu.get("wall_s", math.nan)),
        commit=str((run.summary.get("provenance") or {}).get("git_commit", ""))[:12],
    )


def _read_cpu(run_dir: Path) -> dict[str, float]:
    path = run_dir.with_name(run_dir.name + ".cpu.json")
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval (n - 1 degrees of freedom); NaN bounds for n < 2."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def compare(runs: dict[tuple[str, str, int], RunFacts]) -> list[Comparison]:
    out = []
    metrics = (
        ("time_to_target", "ratio", "time_to_target_s"),
        ("energy_to_target", "ratio", "energy_to_target_j"),
        ("updates_to_target", "ratio", "updates_to_target"),
        ("final_accuracy", "difference", "final_accuracy"),
        # Whole runs (every pair has them, reached or not): the same rounds' virtual time
        # and energy (study_shakespeare), or the same budget's (the async comparison).
        ("run_time", "ratio", "virtual_time_s"),
        ("run_energy", "ratio", "energy_j"),
    )
    for experiment, (baseline, arms) in COMPARISONS.items():
        for arm in arms:
            seeds = sorted(
                s for (e, a, s) in runs if e == experiment and a == arm and (e, baseline, s) in runs
            )
            if not seeds:
                continue
            for metric, kind, key in metrics:
                values = []
                for s in seeds:
                    a = getattr(runs[(experiment, arm, s)], key)
                    b = getattr(runs[(experiment, baseline, s)], key)
                    if kind == "difference":
                        values.append(100.0 * (a - b))
                    elif a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
                        values.append(math.log(a / b))
                c = Comparison(experiment, arm, baseline, metric, kind, len(seeds), len(values))
                mean, low, high = t_interval(values)
                if kind == "ratio":
                    c.values = [math.exp(v) for v in values]
                    c.estimate, c.low, c.high = (math.exp(v) for v in (mean, low, high))
                else:
                    c.values = values
                    c.estimate, c.low, c.high = mean, low, high
                out.append(c)
    return out


# --- output ---------------------------------------------------------------------------------


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if not math.isfinite(x) else f"{x:.{digits}f}"


def interval(c: Comparison) -> str:
    unit = "x" if c.kind == "ratio" else " pts"
    if not math.isfinite(c.estimate):
        return "no pair reached the target"
    if not math.isfinite(c.low):
        return f"{_fmt(c.estimate)}{unit} (one pair: no interval)"
    return f"{_fmt(c.estimate)}{unit} [{_fmt(c.low)}, {_fmt(c.high)}]"


def markdown(
    runs: dict[tuple[str, str, int], RunFacts], comps: list[Comparison], title: str
) -> str:
    lines = [f"# {title}", ""]
    lines += [
        "Ratios are arm / baseline per seed (paired: the same seed draws the same phones,",
        "partition and pretrained start for both), summarised as the geometric mean with a",
        "95% t-interval on the log-ratio over the seeds that reached the target in both",
        "runs; accuracy differences (points) with a 95% t-interval. Virtual time and",
        "energy are fedbench's emulated figures, so host load does not change them.",
        "",
    ]
    for experiment, (baseline, arms) in COMPARISONS.items():
        exp_runs = [f for (e, _, _), f in sorted(runs.items()) if e == experiment]
        if not exp_runs:
            continue
        target = exp_runs[0].target
        lines += [f"## {experiment} (target accuracy {100 * target:.2f}%)", ""]
        lines += [
            "| arm vs baseline | seeds both reached | time to target | energy to target "
            "| updates to target | final accuracy, difference | whole run: virtual time "
            "| whole run: energy |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for arm in arms:
            row = {c.metric: c for c in comps if c.experiment == experiment and c.arm == arm}
            if not row:
                continue
            t = row["time_to_target"]
            lines.append(
                f"| {ARM_LABELS[arm]} vs {ARM_LABELS[baseline]} | {t.paired}/{t.seeds} "
                f"| {interval(t)} | {interval(row['energy_to_target'])} "
                f"| {interval(row['updates_to_target'])} | {interval(row['final_accuracy'])} "
                f"| {interval(row['run_time'])} | {interval(row['run_energy'])} |"
            )
        lines += ["", "Per arm, mean over seeds (sd):", ""]
        lines += [
            "| arm | runs | reached | time to target (s) | energy to target (J) "
            "| final accuracy (%) | best accuracy (%) | rounds | mean round (s) | updates "
            "| examples per update | distinct devices | timeouts+dropped | CPU s per run |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for arm in (baseline, *arms):
            fs = [f for f in exp_runs if f.arm == arm]
            if not fs:
                continue
            lines.append(
                f"| {ARM_LABELS[arm]} | {len(fs)} | {sum(f.reached for f in fs)}/{len(fs)} "
                + " | ".join(
                    _mean_sd([getattr(f, k) * s for f in fs], d)
                    for k, s, d in (
                        ("time_to_target_s", 1, 0),
                        ("energy_to_target_j", 1, 0),
                        ("final_accuracy", 100, 2),
                        ("best_accuracy", 100, 2),
                        ("rounds", 1, 1),
                        ("mean_round_s", 1, 1),
                        ("updates", 1, 0),
                        ("mean_examples_per_update", 1, 1),
                        ("distinct_devices", 1, 0),
                        ("timeouts_or_dropped", 1, 1),
                        ("cpu_s", 1, 0),
                    )
                ).join(["| ", " |"])
            )
        lines.append("")
    commits = sorted({f.commit for f in runs.values() if f.commit})
    lines += [f"Runs made at commit(s): {', '.join(commits) or 'unknown'}.", ""]
    return "\n".join(lines)


def _mean_sd(values: list[float], digits: int) -> str:
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return "-"
    if len(x) == 1:
        return f"{x[0]:.{digits}f}"
    return f"{x.mean():.{digits}f} ({x.std(ddof=1):.{digits}f})"


def write_tables(
    out: Path, runs: dict[tuple[str, str, int], RunFacts], comps: list[Comparison]
) -> None:
    rows = [asdict(f) for _, f in sorted(runs.items())]
    with (out / "runs.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with (out / "results.csv").open("w", newline="") as fh:
        table = csv.writer(fh)
        table.writerow(
            ["experiment", "arm", "baseline", "metric", "kind", "seeds", "paired"]
            + ["estimate", "ci95_low", "ci95_high", "per_seed"]
        )
        for c in comps:
            table.writerow(
                [c.experiment, c.arm, c.baseline, c.metric, c.kind, c.seeds, c.paired]
                + [_fmt(c.estimate, 4), _fmt(c.low, 4), _fmt(c.high, 4)]
                + [" ".join(_fmt(v, 4) for v in c.values)]
            )


def curve_on(grid: np.ndarray, run: Run) -> np.ndarray:
    """The run's accuracy (%) at each time of `grid`: its last evaluation by then."""
    times = np.array([e.time_s for e in run.evaluations])
    acc = np.array([100.0 * e.accuracy for e in run.evaluations])
    idx = np.searchsorted(times, grid, side="right") - 1
    out = np.where(idx >= 0, acc[np.clip(idx, 0, None)], np.nan)
    out[grid > times[-1]] = np.nan  # past its end: no value
    return out


def figure_curves(
    out: Path, experiment: str, loaded: dict[tuple[str, str, int], Run], target: float
) -> Path | None:
    baseline, arms = COMPARISONS[experiment]
    chosen = [(k, r) for k, r in loaded.items() if k[0] == experiment]
    if not chosen:
        return None
    end = max(r.total_time_s for _, r in chosen)
    grid = np.linspace(0.0, end, 400)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    low, high = 100.0, 0.0
    for i, arm in enumerate((baseline, *arms)):
        runs = [r for (e, a, _), r in chosen if a == arm]
        if not runs:
            continue
        curves = np.array([curve_on(grid, r) for r in runs])
        for c in curves:
            ax.plot(grid, c, color=colours[i], alpha=0.4, linewidth=0.8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # columns past every run's end
            # The mean only where every seed still runs: no mean over a shrinking set.
            mean = np.where(np.isnan(curves).any(axis=0), np.nan, np.nanmean(curves, axis=0))
        label = f"{ARM_LABELS[arm]} (n={len(runs)})"
        ax.plot(grid, mean, color=colours[i], linewidth=2.0, label=label)
        seen = curves[np.isfinite(curves)]
        if seen.size:
            low, high = min(low, float(seen.min())), max(high, float(seen.max()))
    ax.axhline(100 * target, color="0.3", linestyle="--", linewidth=1.0)
    ax.annotate(
        f"target {100 * target:.1f}%",
        xy=(0.99, 100 * target),
        xycoords=("axes fraction", "data"),
        xytext=(0, 3),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=8,
        color="0.3",
        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"},
    )
    pad = max(1.0, 0.05 * (high - low))
    ax.set_ylim(max(0.0, low - pad), min(100.0, max(high, 100 * target) + pad))
    ax.set_xlim(0.0, end)
    ax.set_xlabel("virtual time spent in rounds (s)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{experiment}: accuracy against virtual time (thin: seeds, thick: mean)")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / f"{experiment}_accuracy_vs_time.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def figure_ratios(out: Path, comps: list[Comparison]) -> Path | None:
    shown = [c for c in comps if c.kind == "ratio" and c.metric != "updates_to_target"]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(shown) + 1.4))
    labels = []
    seen = [1.0]
    for y, c in enumerate(shown):
        label = f"{ARM_LABELS[c.arm]} / {ARM_LABELS[c.baseline]}: {METRIC_LABELS[c.metric]}"
        labels.append(f"{label} ({c.paired}/{c.seeds} seeds)")
        if not math.isfinite(c.estimate):
            ax.text(
                1.0,
                y,
                "no seed reached the target in both runs",
                ha="center",
                va="center",
                fontsize=8,
                color="0.4",
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"},
            )
            continue
        seen += [*c.values, c.estimate]
        ax.plot(c.values, [y] * len(c.values), "o", color="0.55", markersize=3.5)
        if math.isfinite(c.low):
            ax.plot([c.low, c.high], [y, y], color="C0", linewidth=2.5)
            seen += [c.low, c.high]
        ax.plot([c.estimate], [y], "D", color="C0", markersize=6)
    ax.set_xlim(min(seen) / 1.25, max(seen) * 1.25)
    ax.axvline(1.0, color="0.3", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    # A few round ratios, not every minor tick of the log axis (they overlap near 1).
    low, high = ax.get_xlim()
    marks = [v for v in (0.1, 0.2, 0.33, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10) if low <= v <= high]
    ax.xaxis.set_major_locator(FixedLocator(marks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("ratio to the baseline (log scale; < 1: less than the baseline)", fontsize=9)
    ax.set_title("geometric mean (diamond), 95% t-interval (line), seeds (dots)", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    path = out / "ratios.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    keys = dict(a.split("=", 1) for a in args if "=" in a)
    paths = [Path(a) for a in args if "=" not in a]
    if len(paths) != 1 or not paths[0].is_dir():
        print(USAGE, file=sys.stderr)
        return 2
    root = paths[0]
    out = Path(keys.pop("out", DEFAULT_OUT))
    title = keys.pop("title", "Scale study: results")
    overrides = {k.split(".", 1)[1]: float(v) for k, v in keys.items() if k.startswith("target.")}
    unknown = [k for k in keys if not k.startswith("target.")]
    if unknown:
        print(f"unknown key(s) {unknown}; {USAGE}", file=sys.stderr)
        return 2
    loaded: dict[tuple[str, str, int], Run] = {}
    runs: dict[tuple[str, str, int], RunFacts] = {}
    for experiment in COMPARISONS:
        target = overrides.get(experiment) or study_target(experiment)
        for run_dir in sorted((root / experiment).glob("*/seed*")):
            if not (run_dir / "summary.json").is_file():
                continue
            run = load_run(run_dir)
            if run.status != "completed":
                print(f"skipped {run_dir}: status {run.status}", file=sys.stderr)
                continue
            key = (experiment, run_dir.parent.name, run.seed)
            loaded[key] = run
            runs[key] = facts(run, experiment, run_dir.parent.name, target)
    # FedBuff's synchronous baseline: the random runs up to FedBuff's budget.
    budget = study_budget_s()
    target = overrides.get("study_shakespeare_async") or study_target("study_shakespeare_async")
    for (experiment, arm, seed), run in list(loaded.items()):
        if experiment != "study_shakespeare" or arm != "random":
            continue
        cut, whole = up_to_budget(run, budget)
        if not whole:
            print(
                f"note: {run.path} ends at {run.total_time_s:.0f} s, before the budget "
                f"{budget:g} s: its sync arm is the whole run",
                file=sys.stderr,
            )
        key = ("study_shakespeare_async", "sync", seed)
        loaded[key] = cut
        runs[key] = dataclasses.replace(
            facts(cut, "study_shakespeare_async", "sync", target), cpu_s=math.nan, wall_s=math.nan
        )
    if not runs:
        print(f"{root}: no completed runs under <experiment>/<arm>/seed<N>/", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    comps = compare(runs)
    write_tables(out, runs, comps)
    (out / "results.md").write_text(markdown(runs, comps, title))
    written = [out / n for n in ("results.md", "results.csv", "runs.csv")]
    for experiment in COMPARISONS:
        target = overrides.get(experiment) or study_target(experiment)
        written.append(figure_curves(out, experiment, loaded, target) or out)
    written.append(figure_ratios(out, comps) or out)
    print("\n".join(sorted({str(p) for p in written if p != out})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
