"""Runs grouped by experiment and strategy: targets, per-run metrics, mean +- std over seeds.

The target accuracy of an experiment is either given (`target=ACC`, or
`target.NAME=ACC` for one experiment)
or `fraction` x the best strategy's mean final accuracy (over its seeds):
a level every reasonable strategy should get to, set by the data rather
than picked after looking at who wins. Times and energies to target are
averaged over the runs that reached it; how many did is reported next to
them, and a strategy none of whose runs reached it shows no figure.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.analyze.runs import Run, participation_fairness, time_to_target
from fedbench.core.records import STATUSES

FAILURES: tuple[str, ...] = tuple(s for s in STATUSES if s != "ok")


@dataclass(frozen=True)
class RunRow:
    """One run's figures (runs.csv)."""

    experiment: str
    scenario: str
    strategy: str
    seed: int
    status: str
    target: float
    reached: bool
    round_to_target: float
    time_to_target_s: float
    energy_to_target_j: float
    clock_to_target_s: float
    final_accuracy: float
    total_time_s: float
    total_energy_j: float
    jain: float
    ok: int
    oom: int
    dropped: int
    timeout: int
    failed: int
    host_wall_s: float


@dataclass(frozen=True)
class StrategyRow:
    """One strategy in one experiment, over its seeds (results.csv)."""

    experiment: str
    scenario: str
    strategy: str
    runs: int
    reached: int
    target: float
    round_to_target: tuple[float, float]
    time_to_target_s: tuple[float, float]
    energy_to_target_j: tuple[float, float]
    final_accuracy: tuple[float, float]
    total_time_s: tuple[float, float]
    total_energy_j: tuple[float, float]
    jain: tuple[float, float]
    failures: dict[str, int]  # summed over the seeds


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of the finite values (std NaN below 2 values)."""
    x = np.array([v for v in values if not math.isnan(v)], dtype=np.float64)
    if len(x) == 0:
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan


def labels(runs: list[Run]) -> dict[Path, str]:
    """Label per run: the strategy's module name, its parameters and the server's choices
    (algorithm, mode, round close) that set it apart.

    Two sweeps of one strategy with different parameters (a tuned variant
    next to the default), or under another run mode (sync vs FedBuff), must
    not be averaged together: `random`, `random(beta=0.5)`, `random [fedbuff]`.
    """
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    experiments: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[(run.experiment, run.strategy)].append(run)
        experiments[run.experiment].append(run)
    arms = {
        name: _differing([r.arms for r in members], present_only=True)
        for name, members in experiments.items()
    }
    out: dict[Path, str] = {}
    for members in groups.values():
        differing = _differing([r.strategy_config for r in members])
        for run in members:
            extra = ", ".join(f"{k}={run.strategy_config.get(k)}" for k in differing)
            label = f"{run.strategy}({extra})" if extra else run.strategy
            arm = _arm_label(run.arms, arms[run.experiment])
            out[run.path] = f"{label} [{arm}]" if arm else label
    return out


def _differing(configs: list[dict[str, Any]], present_only: bool = False) -> list[str]:
    """Keys whose values differ; `present_only`: among the configs that have the key
    (a FedBuff parameter does not set a FedBuff run apart from a synchronous one)."""
    keys = sorted({k for c in configs for k in c})
    return [
        k for k in keys if len({repr(c.get(k)) for c in configs if k in c or not present_only}) > 1
    ]


def _arm_label(arms: dict[str, Any], differing: list[str]) -> str:
    """`fedbuff`, `synchronous, deadline`, `mode.buffer_size=10`: what differs, short."""
    parts = []
    for key in differing:
        if key not in arms:
            continue  # a parameter of another class (a FedBuff key on a sync run)
        value = arms[key]
        if key.endswith("._target_"):
            parts.append(str(value).rsplit(".", 1)[-1].lower())
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def targets(
    runs: list[Run], fraction: float, fixed: dict[str, float] | None = None
) -> dict[str, float]:
    """Target accuracy per experiment: fixed, else fraction x best mean final accuracy.

    A pretrained day-0 model can already sit above fraction x best (the runs
    improve it by less than 1 - fraction): every run would "reach" the target
    at round 0 and every to-target figure would be empty. The target is then
    day 0's accuracy plus `fraction` of the best improvement over it, with a
    warning (`raised_targets` says which and why).
    """
    return {e: t for e, (t, _) in _targets(runs, fraction, fixed).items()}


def raised_targets(
    runs: list[Run], fraction: float, fixed: dict[str, float] | None = None
) -> dict[str, str]:
    """experiment -> why its default target is not fraction x best (see `targets`)."""
    return {e: why for e, (_, why) in _targets(runs, fraction, fixed).items() if why}


def _targets(
    runs: list[Run], fraction: float, fixed: dict[str, float] | None
) -> dict[str, tuple[float, str]]:
    named = labels(runs)
    finals: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    start: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        finals[run.experiment][named[run.path]].append(run.final_accuracy)
        if run.evaluations and run.evaluations[0].round == 0:
            start[run.experiment].append(run.evaluations[0].accuracy)
    out: dict[str, tuple[float, str]] = {}
    for experiment, by_strategy in finals.items():
        if fixed and experiment in fixed:
            out[experiment] = (fixed[experiment], "")
            continue
        means = [mean_std(v)[0] for v in by_strategy.values()]
        best = max((m for m in means if not math.isnan(m)), default=math.nan)
        target = fraction * best  # NaN: no run was ever evaluated
        day0 = max((a for a in start[experiment] if not math.isnan(a)), default=math.nan)
        if not math.isnan(day0) and target <= day0:
            raised = day0 + fraction * max(best - day0, 0.0)
            out[experiment] = (
                raised,
                f"{fraction:g} x the best mean final accuracy ({target:.4f}) is at or below "
                f"the day-0 accuracy {day0:.4f}: target {raised:.4f} (day 0 + {fraction:g} x "
                "the best gain); set target= for another",
            )
        else:
            out[experiment] = (target, "")
    return out


def run_rows(runs: list[Run], target_of: dict[str, float]) -> list[RunRow]:
    named = labels(runs)
    rows = []
    for run in sorted(runs, key=lambda r: (r.experiment, named[r.path], r.seed)):
        hit = time_to_target(run, target_of[run.experiment])
        at = hit.evaluation
        rows.append(
            RunRow(
                experiment=run.experiment,
                scenario=run.scenario,
                strategy=named[run.path],
                seed=run.seed,
                status=run.status,
                target=hit.target,
                reached=hit.reached,
                round_to_target=float(at.round) if at else math.nan,
                time_to_target_s=hit.time_s,
                energy_to_target_j=hit.energy_j,
                clock_to_target_s=at.clock_s if at else math.nan,
                final_accuracy=run.final_accuracy,
                total_time_s=run.total_time_s,
                total_energy_j=run.total_energy_j,
                jain=participation_fairness(run),
                host_wall_s=run.host_wall_s,
                **run.status_counts,
            )
        )
    return rows


def strategy_rows(rows: list[RunRow]) -> list[StrategyRow]:
    groups: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[(row.experiment, row.strategy)].append(row)
    out = []
    for (experiment, strategy), members in sorted(groups.items()):
        reached = [m for m in members if m.reached]
        out.append(
            StrategyRow(
                experiment=experiment,
                scenario=members[0].scenario,
                strategy=strategy,
                runs=len(members),
                reached=len(reached),
                target=members[0].target,
                round_to_target=mean_std(m.round_to_target for m in reached),
                time_to_target_s=mean_std(m.time_to_target_s for m in reached),
                energy_to_target_j=mean_std(m.energy_to_target_j for m in reached),
                final_accuracy=mean_std(m.final_accuracy for m in members),
                total_time_s=mean_std(m.total_time_s for m in members),
                total_energy_j=mean_std(m.total_energy_j for m in members),
                jain=mean_std(m.jain for m in members),
                failures={s: sum(getattr(m, s) for m in members) for s in FAILURES},
            )
        )
    return out


def accuracy_per_day(runs: list[Run]) -> list[dict[str, Any]]:
    """Mean +- std accuracy over seeds at every evaluated day (day 0 = pretrained)."""
    named = labels(runs)
    acc: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for run in runs:
        for e in run.evaluations:
            acc[(run.experiment, named[run.path], e.day)].append(e.accuracy)
    rows = []
    for (experiment, strategy, day), values in sorted(acc.items()):
        mean, std = mean_std(values)
        rows.append(
            {
                "experiment": experiment,
                "strategy": strategy,
                "day": day,
                "accuracy_mean": mean,
                "accuracy_std": std,
                "runs": len(values),
            }
        )
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def flat(row: StrategyRow) -> dict[str, Any]:
    """results.csv: a (mean, std) pair becomes two columns."""
    out: dict[str, Any] = {}
    for key, value in asdict(row).items():
        if isinstance(value, tuple):
            out[f"{key}_mean"], out[f"{key}_std"] = value
        elif isinstance(value, dict):
            out.update(value)
        else:
            out[key] = value
    return out
