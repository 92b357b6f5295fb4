"""One run folder of the strategy study: what it was and what it cost until it got good.

A run folder is anything holding the three files fedbench writes
(`config.yaml`, `rounds.csv`, `summary.json`; fedbench/report/writer.py).
Which strategy, seed and scenario it belongs to is read from its resolved
config, never from the folder's name, so sweeps from several multirun
commands (or copied by hand) can be mixed.

Time is the virtual time the fleet spent in rounds: per round the server's
rule (fedbench/app/experiment.py: a round lasts as long as its slowest
report's round trip, cut at `train.deadline_s`), summed. In plain many-round
FL that is the virtual clock; in the daily scenario the clock also counts
the idle hours between days, identical for every strategy, so the summed
round time is what a strategy changes (the clock is kept as `clock_s`).
Energy is every report's `energy_j` - timeouts, failures and out-of-memory
rounds included, since the device spent it - summed up to and including
the round after which the model was evaluated.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fedbench.fleet import expand_fleet
from fedbench.report.records import STATUSES
from fedbench.report.writer import ROUNDS_CSV, SUMMARY_JSON

CONFIG_YAML = "config.yaml"
# Heat-map cell values: 0 = not picked, then 1 + the status' index in STATUSES.
NOT_PICKED = 0
# Config keys that differ between the runs of one comparison (or change nothing
# measured); everything else is the experiment's setup, which runs must share.
NOT_SETUP = frozenset(
    {"seed", "strategy", "name", "output_dir", "resume", "verbose", "runtime", "report"}
)


@dataclass(frozen=True)
class Evaluation:
    """The global model's test accuracy after `round` (round 0: before any training)."""

    day: int
    round: int
    accuracy: float
    time_s: float  # summed virtual round time up to and including `round`
    energy_j: float  # summed report energy up to and including `round`
    clock_s: float  # the run's virtual clock (daily: includes the nights)


@dataclass(frozen=True)
class Run:
    path: Path
    experiment: str  # the experiment's name (e.g. study_daily): runs compare within one
    setup: str  # hash of the config apart from strategy and seed (NOT_SETUP)
    scenario: str  # the scenario class' module, e.g. "daily" or "rounds"
    strategy: str  # the strategy's module in strategies/, e.g. "heteroaware"
    strategy_config: dict[str, Any]  # its resolved parameters, seed removed
    seed: int
    devices: tuple[str, ...]  # every device of the fleet, in fleet order
    status: str  # the summary's: completed | failed | running
    evaluations: tuple[Evaluation, ...]
    selections: dict[str, int]  # device -> rounds it was picked in (any status)
    status_counts: dict[str, int]
    total_energy_j: float
    total_time_s: float
    heat: np.ndarray  # devices x rounds: NOT_PICKED or 1 + status index
    host_wall_s: float

    @property
    def final_accuracy(self) -> float:
        return self.evaluations[-1].accuracy if self.evaluations else math.nan


@dataclass(frozen=True)
class Reached:
    """When a run first reached a target accuracy (None fields: it never did)."""

    target: float
    evaluation: Evaluation | None

    @property
    def reached(self) -> bool:
        return self.evaluation is not None

    @property
    def time_s(self) -> float:
        return self.evaluation.time_s if self.evaluation else math.nan

    @property
    def energy_j(self) -> float:
        return self.evaluation.energy_j if self.evaluation else math.nan


def find_run_dirs(roots: list[Path]) -> list[Path]:
    """Every folder under `roots` (or a root itself) that holds a complete set of run files."""
    found: set[Path] = set()
    for root in roots:
        for config in [root / CONFIG_YAML, *root.rglob(CONFIG_YAML)]:
            folder = config.parent
            if all((folder / name).is_file() for name in (CONFIG_YAML, ROUNDS_CSV, SUMMARY_JSON)):
                found.add(folder.resolve())
    return sorted(found)


def module_of(target: str) -> str:
    """'strategies.heteroaware.HeteroAware' -> 'heteroaware'."""
    parts = target.split(".")
    return parts[-2] if len(parts) >= 2 else target


def load_run(path: Path) -> Run:
    config = yaml.safe_load((path / CONFIG_YAML).read_text())
    summary = json.loads((path / SUMMARY_JSON).read_text())
    with (path / ROUNDS_CSV).open(newline="") as f:
        rows = list(csv.DictReader(f))
    devices = tuple(d.name for d in expand_fleet(config["fleet"]))
    # Runs since the round-close policies keep the deadline there; older ones in train.
    deadline = (config.get("round_close") or {}).get("deadline_s")
    if deadline is None:
        deadline = config.get("train", {}).get("deadline_s")
    days = summary.get("days", [])
    last = max([int(d["round"]) for d in days] + [int(row["round"]) for row in rows] + [0])
    deadline_s = None if deadline is None else float(deadline)
    durations, energies = _per_round(rows, last, deadline_s)
    time_s, energy_j = np.cumsum(durations), np.cumsum(energies)
    evaluations = []
    for day in days:
        r = int(day["round"])
        evaluations.append(
            Evaluation(
                day=int(day["day"]),
                round=r,
                accuracy=float(day["accuracy"]),
                time_s=float(time_s[r]),
                energy_j=float(energy_j[r]),
                clock_s=float(day["virtual_time_s"]),
            )
        )
    strategy = dict(config["strategy"])
    strategy.pop("seed", None)
    return Run(
        path=path,
        experiment=str(config.get("name") or summary.get("name") or "default"),
        setup=setup_hash(config),
        scenario=module_of(str(config["scenario"]["_target_"])),
        strategy=module_of(str(strategy["_target_"])),
        strategy_config=strategy,
        seed=int(config.get("seed", 0)),
        devices=devices,
        status=str(summary.get("status", "")),
        evaluations=tuple(evaluations),
        selections=dict(Counter(row["device"] for row in rows)),
        status_counts={s: sum(row["status"] == s for row in rows) for s in STATUSES},
        total_energy_j=float(energy_j[-1]),
        total_time_s=float(time_s[-1]),
        heat=_heat(rows, devices, last),
        host_wall_s=float(summary.get("totals", {}).get("host_wall_s") or math.nan),
    )


def setup_hash(config: dict[str, Any]) -> str:
    setup = {k: v for k, v in config.items() if k not in NOT_SETUP}
    return hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:6]


def load_runs(dirs: list[Path]) -> list[Run]:
    """Load run folders; an experiment name used by several setups gets the setup's hash.

    Runs of `study_daily` before and after an edit of its config (or two
    ad-hoc runs both named `default`) must not be averaged together.
    """
    runs = [load_run(d) for d in dirs]
    setups: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        setups[run.experiment].add(run.setup)
    return [
        replace(run, experiment=f"{run.experiment}-{run.setup}")
        if len(setups[run.experiment]) > 1
        else run
        for run in runs
    ]


def _number(cell: str) -> float:
    return float(cell) if cell not in ("", None) else math.nan


def _per_round(
    rows: list[dict[str, str]], last: int, deadline_s: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Virtual duration and energy of rounds 0..last; round 0 (before training) is zero."""
    longest = np.zeros(last + 1)
    energy = np.zeros(last + 1)
    for row in rows:
        r = int(row["round"])
        trip, joules = _number(row["round_trip_s"]), _number(row["energy_j"])
        if not math.isnan(trip):
            longest[r] = max(longest[r], trip)
        if not math.isnan(joules):  # a dropped device reported nothing: no figure, not 0 J
            energy[r] += joules
    duration = longest if deadline_s is None else np.minimum(longest, deadline_s)
    return duration, energy


def _heat(rows: list[dict[str, str]], devices: tuple[str, ...], rounds: int) -> np.ndarray:
    index = {d: i for i, d in enumerate(devices)}
    heat = np.full((len(devices), rounds), NOT_PICKED, dtype=np.int64)
    for row in rows:
        if row["device"] in index:
            heat[index[row["device"]], int(row["round"]) - 1] = 1 + STATUSES.index(row["status"])
    return heat


def time_to_target(run: Run, target: float) -> Reached:
    """The first evaluation at or above `target` (day 0 counts: a model may start there)."""
    for evaluation in run.evaluations:
        if evaluation.accuracy >= target:
            return Reached(target, evaluation)
    return Reached(target, None)


def jain_index(counts: list[int] | np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = all equal, 1/n = one takes all."""
    x = np.asarray(counts, dtype=np.float64)
    if len(x) == 0 or not np.any(x):
        return math.nan
    return float(x.sum() ** 2 / (len(x) * np.square(x).sum()))


def participation_fairness(run: Run) -> float:
    """Jain's index over how often each device of the fleet was picked (never = 0)."""
    return jain_index([run.selections.get(d, 0) for d in run.devices])
