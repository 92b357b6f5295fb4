"""One run folder, read back: what it was, and what it cost round by round until it got good.

A run folder is what fedbench writes (fedbench/report/writer.py,
docs/results.md): `rounds.csv` (one row per device per round),
`summary.json` (evaluations, totals), `config.yaml` (the resolved
experiment) and, from newer runs, `server_rounds.csv` (one row per server
round). Everything here tolerates what an old, partial or failed run lacks:
no server_rounds.csv, no start_s/end_s columns, no evaluation after the
last round, no config, a round where every device failed. Which strategy,
seed and scenario a run belongs to is read from its config, never from the
folder's name, so sweeps from several commands (or copied by hand) mix.

Time is the virtual time the fleet spent in rounds: per round the server's
duration (server_rounds.csv `duration_s`; older runs: the slowest report's
round trip, cut at `train.deadline_s`), summed. In plain many-round FL that
is the virtual clock; in the daily scenario the clock also counts the idle
hours between days, identical for every strategy, so the summed round time
is what a strategy changes (the clock is kept as `clock_s`). Energy is
every report's `energy_j` - timeouts, failures and out-of-memory rounds
included, since the device spent it - summed up to and including the round
after which the model was evaluated; a report without a figure adds
nothing (and is counted as unknown), and a run where no report measured
energy has unknown (NaN) energy, not 0 J.

Nothing here holds an entry per device of the fleet: a run of 1,000,000
devices is its groups (`RunFleet`) and the devices its records name, so
loading and analysing a run costs O(device-rounds), whatever the fleet.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fedbench.core.device import DeviceSpec
from fedbench.core.records import STATUSES
from fedbench.errors import FedbenchError
from fedbench.experiment.fleet import Fleet
from fedbench.report.nested import flatten
from fedbench.report.progress import console
from fedbench.trust import bounded

CONFIG_YAML = "config.yaml"
ROUNDS_CSV = "rounds.csv"
SUMMARY_JSON = "summary.json"
SERVER_ROUNDS_CSV = "server_rounds.csv"
# The columns of server_rounds.csv (written by the server loop; docs/results.md).
SERVER_ROUND_COLUMNS: tuple[str, ...] = (
    "round",
    "day",
    "start_s",
    "duration_s",
    "end_s",
    "picked",
    "replied",
    "aggregated",
    "close",
    "model_version",
    "host_round_s",
)
# Heat-map cell values: 0 = not picked, then 1 + the status' index in STATUSES.
NOT_PICKED = 0
# Config keys that differ between the runs of one comparison (or change nothing
# measured); everything else is the experiment's setup, which runs must share.
# The server-side choices a comparison sets side by side, like strategies: they label
# runs (fedbench.analyze.tables.labels) rather than split them into experiments.
ARMS = ("algorithm", "mode", "round_close")
NOT_SETUP = frozenset(
    {"seed", "strategy", "name", "output_dir", "resume", "verbose", "runtime", "report", *ARMS}
)


@dataclass(frozen=True)
class Evaluation:
    """The global model's test accuracy after `round` (round 0: before any training)."""

    day: int
    round: int
    accuracy: float
    time_s: float  # summed virtual round time up to and including `round`
    energy_j: float  # summed report energy up to and including `round` (NaN: none measured)
    clock_s: float  # the run's virtual clock (daily: includes the nights)
    loss: float = math.nan
    examples: float = math.nan  # test examples behind `accuracy` (NaN: not recorded)


@dataclass(frozen=True)
class RunFleet:
    """The fleet of a run without an entry per device: its groups and the devices recorded.

    `position` places every device rounds.csv names in the fleet (devices the
    config does not name - an old config, a renamed profile - come after it,
    in the order the records name them).
    """

    size: int
    groups: tuple[tuple[str, int, int], ...]  # (profile, first position, devices), fleet order
    position: dict[str, int]  # every device of rounds.csv -> its place in the fleet
    spec: Sequence[DeviceSpec] = ()  # the config's fleet (empty: it could not be expanded)

    def profiles(self) -> dict[str, int]:
        """Profile -> devices in the fleet, in order of first appearance."""
        out: dict[str, int] = {}
        for profile, _, count in self.groups:
            out[profile] = out.get(profile, 0) + count
        return out

    def recorded(self) -> list[str]:
        """The devices the records name, in fleet order."""
        return sorted(self.position, key=self.position.__getitem__)

    def names(self) -> list[str]:
        """Every device in fleet order: for figures with a row per device (small fleets)."""
        extra = [d for d in self.recorded() if self.position[d] >= len(self.spec)]
        return [d.name for d in self.spec] + extra


@dataclass(frozen=True)
class Picks:
    """rounds.csv as columns, one entry per device-round: where, when and how it ended."""

    position: np.ndarray  # the device's place in the fleet (RunFleet.position)
    round: np.ndarray
    status: np.ndarray  # 1 + its index in STATUSES (NOT_PICKED: none of them)

    def heat(self, devices: int, rounds: int) -> np.ndarray:
        """devices x rounds: NOT_PICKED or 1 + status index (only for a fleet shown row by row)."""
        heat = np.full((devices, rounds), NOT_PICKED, dtype=np.int8)
        keep = (self.round >= 1) & (self.round <= rounds) & (self.position < devices)
        keep &= self.status != NOT_PICKED
        heat[self.position[keep], self.round[keep] - 1] = self.status[keep]
        return heat


@dataclass(frozen=True)
class Run:
    path: Path
    experiment: str  # the experiment's name (e.g. study_daily): runs compare within one
    setup: str  # hash of the config apart from strategy and seed (NOT_SETUP)
    scenario: str  # the scenario class' module, e.g. "daily" or "rounds"
    strategy: str  # the strategy's module in strategies/, e.g. "heteroaware"
    strategy_config: dict[str, Any]  # its resolved parameters, seed removed
    seed: int
    fleet: RunFleet
    status: str  # the summary's: completed | failed | running
    evaluations: tuple[Evaluation, ...]
    selections: dict[str, int]  # device -> rounds it was picked in (any status)
    status_counts: dict[str, int]
    total_energy_j: float
    total_time_s: float
    picks: Picks
    host_wall_s: float
    config: dict[str, Any] = field(default_factory=dict, repr=False)
    summary: dict[str, Any] = field(default_factory=dict, repr=False)
    rows: tuple[dict[str, str], ...] = field(default=(), repr=False)  # rounds.csv
    server_rows: tuple[dict[str, str], ...] | None = field(default=None, repr=False)
    durations: np.ndarray = field(default_factory=lambda: np.zeros(1), repr=False)
    round_energy: np.ndarray = field(default_factory=lambda: np.zeros(1), repr=False)
    # ARMS, dotted key -> value, e.g. {"mode._target_": "fedbench.server.fedbuff.FedBuff"}
    arms: dict[str, Any] = field(default_factory=dict)
    # Submodel algorithms (docs/submodels.md): day -> width rate -> test accuracy of that
    # rate's submodel (summary.json `accuracy_per_rate`); empty for any other run.
    accuracy_per_rate: dict[int, dict[float, float]] = field(default_factory=dict, repr=False)

    @property
    def final_accuracy(self) -> float:
        return self.evaluations[-1].accuracy if self.evaluations else math.nan

    @property
    def rounds(self) -> int:
        """The last round with any record (0: none ran)."""
        return len(self.durations) - 1

    @property
    def by_day(self) -> bool:
        """Daily scenario: results are labelled by day, not round."""
        return self.scenario == "daily"

    @property
    def pretrained(self) -> bool:
        """Did the server pretrain (day 0 is a pretrained model, not an initial one)?"""
        scenario = self.config.get("scenario") or {}
        pretrain = scenario.get("pretrain") or {}
        return self.by_day if not pretrain else int(pretrain.get("epochs", 0) or 0) > 0

    @property
    def energy_known(self) -> bool:
        return any(not math.isnan(_number(row.get("energy_j"))) for row in self.rows)


@dataclass(frozen=True)
class Reached:
    """When a run first reached a target accuracy (None: it never did)."""

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


def is_run_dir(folder: Path) -> bool:
    return (folder / ROUNDS_CSV).is_file() and (folder / SUMMARY_JSON).is_file()


def find_run_dirs(roots: list[Path]) -> list[Path]:
    """Every folder under `roots` (or a root itself) holding rounds.csv and summary.json."""
    found: set[Path] = set()
    for root in roots:
        for summary in [root / SUMMARY_JSON, *root.rglob(SUMMARY_JSON)]:
            if is_run_dir(summary.parent):
                found.add(summary.parent.resolve())
    return sorted(found)


def module_of(target: str) -> str:
    """'strategies.heteroaware.HeteroAware' -> 'heteroaware'."""
    parts = target.split(".")
    return parts[-2] if len(parts) >= 2 else target


def read_csv(path: Path, required: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """A run's CSV as rows; one that is not what fedbench writes is refused, naming the line."""
    if not path.is_file():
        return []
    damaged = f"{path}: not a {path.name} fedbench wrote"
    try:  # its size before a byte is read, each line's length as it is read
        with bounded.capped_lines(path, str(path), bounded.RUN_CSV) as lines:
            reader = csv.DictReader(lines)
            rows = list(reader)
            header = list(reader.fieldnames or [])
    except UnicodeDecodeError:
        raise FedbenchError(f"{damaged} (not text)") from None
    except csv.Error as exc:
        raise FedbenchError(f"{damaged} ({exc})") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise FedbenchError(f"{damaged} (no column {', '.join(missing)}; it has {len(header)})")
    for line, row in enumerate(rows, 2):
        if None in row or None in row.values():
            raise FedbenchError(f"{damaged} (line {line} has not {len(header)} values)")
        if "round" in required and not row["round"].strip().isdigit():
            raise FedbenchError(f"{damaged} (line {line}: round {row['round']!r})")
    return rows


def _read_json(path: Path) -> dict[str, Any]:
    """summary.json as written; a damaged one is refused rather than read as empty."""
    if not path.exists():
        return {}
    try:
        data = bounded.load_json(path, str(path), bounded.SUMMARY_JSON)
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise FedbenchError(f"{path}: not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise FedbenchError(f"{path}: a JSON {type(data).__name__}, not the object fedbench writes")
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:  # a shared folder's: its size, nesting and aliases are checked before it is built
        data = bounded.load_yaml(path, str(path), bounded.CONFIG_YAML)
    except (ValueError, yaml.YAMLError):  # UnicodeDecodeError is a ValueError
        return {}
    return data if isinstance(data, dict) else {}


def _number(cell: object) -> float:
    if cell in ("", None):
        return math.nan
    try:
        return float(cell)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def number(cell: object) -> float:
    """A CSV cell as a float; empty (unknown) is NaN."""
    return _number(cell)


def run_fleet(config: dict[str, Any], rows: list[dict[str, str]]) -> RunFleet:
    """The fleet from the config (its groups), placing every device the records name."""
    spec: Fleet | None = None
    fleet = config.get("fleet")
    if isinstance(fleet, dict):
        from fedbench.experiment.fleet import expand_fleet

        try:
            spec = expand_fleet(fleet)
        except FedbenchError:
            spec = None  # a config this fedbench cannot expand: the records still name devices
    position: dict[str, int] = {}
    size = len(spec) if spec is not None else 0
    for row in rows:
        name = row.get("device", "")
        if not name or name in position:
            continue
        at = spec.index_of(name) if spec is not None else None
        if at is None:
            at, size = size, size + 1
        position[name] = at
    if spec is None:
        return RunFleet(size, _groups_of(position, rows), position)
    groups = tuple(
        (p, int(start), c)
        for p, start, c in zip(spec.profiles, spec.starts[:-1], spec.counts, strict=True)
    )
    extra = size - len(spec)
    return RunFleet(
        size,
        groups + ((("(not in the config)", len(spec), extra),) if extra else ()),
        position,
        spec,
    )


def _groups_of(
    position: dict[str, int], rows: list[dict[str, str]]
) -> tuple[tuple[str, int, int], ...]:
    """Without a config's fleet: one group per profile the records name, in record order."""
    profile = {row.get("device", ""): row.get("profile", "") or "?" for row in rows}
    groups: list[list[Any]] = []
    for name in sorted(position, key=position.__getitem__):
        if groups and groups[-1][0] == profile[name]:
            groups[-1][2] += 1
        else:
            groups.append([profile[name], position[name], 1])
    return tuple((str(p), int(a), int(c)) for p, a, c in groups)


def load_run(path: Path) -> Run:
    if not path.is_dir():
        raise FedbenchError(f"{path}: no such run folder")
    config = _read_yaml(path / CONFIG_YAML)
    summary = _read_json(path / SUMMARY_JSON)
    rows = read_csv(path / ROUNDS_CSV, ("round", "device", "status"))
    server_path = path / SERVER_ROUNDS_CSV
    server_rows = read_csv(server_path, ("round",)) if server_path.is_file() else None
    fleet = run_fleet(config, rows)
    days = [d for d in summary.get("days", []) if isinstance(d, dict)]
    check_recorded(path / ROUNDS_CSV, rows, days, server_rows)
    accuracies = checked_accuracies(path / SUMMARY_JSON, days)
    last = max(
        [int(d.get("round", 0)) for d in days]
        + [int(row["round"]) for row in rows]
        + [int(row["round"]) for row in server_rows or []]
        + [0]
    )
    deadline = (config.get("train") or {}).get("deadline_s")
    durations = round_durations(rows, server_rows, last, None if deadline is None else deadline)
    energies = round_energy(rows, last)
    time_s = np.cumsum(durations)
    energy_j = np.cumsum(np.nan_to_num(energies))
    known = ~np.isnan(energies)
    known[0] = False  # round 0's 0 J is no measurement
    energy_seen = np.cumsum(known) > 0  # NaN until some report measured energy
    evaluations = []
    for day, accuracy in zip(days, accuracies, strict=True):
        r = int(day.get("round", 0))
        evaluations.append(
            Evaluation(
                day=int(day.get("day", r)),
                round=r,
                accuracy=accuracy,
                time_s=float(time_s[r]),
                energy_j=float(energy_j[r]) if energy_seen[r] or r == 0 else math.nan,
                clock_s=_number(day.get("virtual_time_s")),
                loss=_number(day.get("loss")),
                examples=_number(day.get("examples")),
            )
        )
    strategy = dict(config.get("strategy") or {})
    strategy.pop("seed", None)
    scenario = config.get("scenario") or {}
    totals = summary.get("totals") or {}
    return Run(
        path=path,
        experiment=str(config.get("name") or summary.get("name") or "default"),
        setup=setup_hash(config),
        scenario=module_of(str(scenario.get("_target_", ""))) or "unknown",
        strategy=module_of(str(strategy.get("_target_", "unknown"))),
        strategy_config=strategy,
        seed=int(config.get("seed", 0) or 0),
        arms=arms_of(config, summary),
        fleet=fleet,
        status=str(summary.get("status", "unknown")),
        evaluations=tuple(evaluations),
        selections=dict(Counter(row["device"] for row in rows)),
        status_counts={s: sum(row.get("status") == s for row in rows) for s in STATUSES},
        total_energy_j=float(energy_j[-1]) if energy_seen[-1] else math.nan,
        total_time_s=float(time_s[-1]),
        picks=_picks(rows, fleet),
        host_wall_s=_number(totals.get("host_wall_s")),
        config=config,
        summary=summary,
        rows=tuple(rows),
        server_rows=None if server_rows is None else tuple(server_rows),
        durations=durations,
        round_energy=energies,
        accuracy_per_rate=per_rate_of(summary),
    )


def check_recorded(
    rounds_csv: Path,
    rows: list[dict[str, str]],
    days: list[dict[str, Any]],
    server_rows: list[dict[str, str]] | None,
) -> None:
    """Refuse a rounds.csv that holds only its header while the run went past round 0.

    A run that failed before its first round writes just the header, and is
    analysed as such; one whose summary or server rounds name a round N > 0
    had rows, so a header alone is a file cut short (or emptied): every
    figure and total would be silently zero.
    """
    if rows:
        return
    named = {
        SUMMARY_JSON: [int(d.get("round", 0)) for d in days],
        SERVER_ROUNDS_CSV: [int(r["round"]) for r in server_rows or []],
    }
    last = max([0, *(r for rounds in named.values() for r in rounds)])
    if last == 0:
        return
    sources = ", ".join(name for name, rounds in named.items() if rounds and max(rounds) > 0)
    raise FedbenchError(
        f"{rounds_csv}: holds only its header, but the run went to round {last} ({sources}): "
        "its rows are missing; nothing to analyse"
    )


def checked_accuracies(summary_json: Path, days: list[dict[str, Any]]) -> list[float]:
    """Each evaluation's accuracy: one outside [0, 1] is refused, a NaN one said in one line.

    fedbench writes an accuracy in [0, 1], or null where a day was not
    evaluated; inf or 1.7 is no accuracy, so the file is refused. A NaN is an
    evaluation that produced no number: it is kept as NaN (means and targets
    skip it) and named, so a mean over seeds is never quietly over fewer runs.
    """
    out: list[float] = []
    for i, day in enumerate(days):
        raw = day.get("accuracy")
        value = _number(raw)
        if not math.isnan(value) and not 0.0 <= value <= 1.0:
            raise FedbenchError(
                f"{summary_json}: days[{i}].accuracy={value:g}: not an accuracy in [0, 1]; "
                "not a summary.json fedbench wrote"
            )
        out.append(value)
    nan = [str(d.get("round", i)) for i, d in enumerate(days) if _is_nan(d.get("accuracy"))]
    if nan:
        console.warn(
            f"{summary_json}: the accuracy of round {', '.join(nan)} is NaN (the evaluation "
            "gave no number); no mean or target counts it (the tables show -)"
        )
    return out


def _is_nan(value: object) -> bool:
    """A NaN written as a number (JSON `NaN`), not a null or missing accuracy."""
    return isinstance(value, float) and math.isnan(value)


def per_rate_of(summary: dict[str, Any]) -> dict[int, dict[float, float]]:
    """summary.json's `accuracy_per_rate` as numbers: day -> width rate -> accuracy.

    Kept small (days x rates, nothing per device). What a day lacks or holds
    damaged (a rate missing, a null accuracy, a key that is not a number) is
    left out rather than refused: the figure draws what exists.
    """
    raw = summary.get("accuracy_per_rate")
    out: dict[int, dict[float, float]] = {}
    for day, rates in raw.items() if isinstance(raw, dict) else ():
        if not isinstance(rates, dict) or not str(day).strip().isdigit():
            continue
        known = {
            float(rate): float(accuracy)
            for rate, accuracy in rates.items()
            if math.isfinite(_number(rate))
            and 0 < _number(rate) <= 1
            and math.isfinite(_number(accuracy))
        }
        if known:
            out[int(day)] = known
    return dict(sorted(out.items()))


def arms_of(config: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The run's ARMS, flattened; round_close only where the run had rounds to close.

    An asynchronous run (summary `async`) aggregates by its buffer: the
    round-close policy in its config did nothing and must not label it.
    """
    used = [a for a in ARMS if not (a == "round_close" and summary.get("async"))]
    return flatten({a: config[a] for a in used if isinstance(config.get(a), dict)})


def setup_hash(config: dict[str, Any]) -> str:
    """The setup's fingerprint. A null leaf counts as absent: a newer fedbench writes
    its new keys with their null default, and that must not split old runs from new."""
    flat = flatten({k: v for k, v in config.items() if k not in NOT_SETUP})
    setup = {k: v for k, v in flat.items() if v is not None}
    return hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:6]


def setup_difference(configs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Per config, the setup keys (dotted) whose values differ between the configs."""
    flat = [flatten({k: v for k, v in c.items() if k not in NOT_SETUP}) for c in configs]
    keys = sorted({k for f in flat for k in f})
    differing = [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1]
    return [{k: str(f.get(k)) for k in differing} for f in flat]


def load_runs(dirs: list[Path]) -> list[Run]:
    """Load run folders; an experiment name used by several setups is split by setup.

    Runs of `study_daily` before and after an edit of its config (or a sweep
    over `scenario.days=3,5`) must not be averaged together: each setup
    becomes its own experiment, named by what sets it apart
    (`default-scenario.days=3`), or by the setup's hash if that is long.
    """
    runs = [load_run(d) for d in dirs]
    setups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for run in runs:
        setups[run.experiment][run.setup] = run.config
    names: dict[tuple[str, str], str] = {}
    for experiment, by_setup in setups.items():
        if len(by_setup) == 1:
            continue
        diffs = setup_difference(list(by_setup.values()))
        for setup, diff in zip(by_setup, diffs, strict=True):
            label = ",".join(f"{k}={v}" for k, v in diff.items())
            names[(experiment, setup)] = f"{experiment}-{label if 0 < len(label) <= 48 else setup}"
    return [
        replace(run, experiment=names[(run.experiment, run.setup)])
        if (run.experiment, run.setup) in names
        else run
        for run in runs
    ]


def round_durations(
    rows: list[dict[str, str]],
    server_rows: list[dict[str, str]] | None,
    last: int,
    deadline_s: float | None,
) -> np.ndarray:
    """Virtual duration of rounds 0..last; round 0 (before training) is zero.

    The server's own figure where it wrote one (server_rounds.csv); older
    runs: the server's rule then, the slowest report's round trip cut at the
    deadline (fedbench's synchronous rounds).
    """
    if server_rows is not None:
        duration = np.zeros(last + 1)
        for row in server_rows:
            value = _number(row.get("duration_s"))
            if not math.isnan(value):
                duration[int(row["round"])] = value
        return duration
    longest = np.zeros(last + 1)
    for row in rows:
        trip = _number(row.get("round_trip_s"))
        if not math.isnan(trip):
            r = int(row["round"])
            longest[r] = max(longest[r], trip)
    return longest if deadline_s is None else np.minimum(longest, float(deadline_s))


def round_energy(rows: list[dict[str, str]], last: int) -> np.ndarray:
    """Energy of rounds 0..last over the reports that measured it; NaN where none did."""
    energy = np.full(last + 1, math.nan)
    energy[0] = 0.0
    for row in rows:
        joules = _number(row.get("energy_j"))
        if not math.isnan(joules):  # a dropped device reported nothing: no figure, not 0 J
            r = int(row["round"])
            energy[r] = joules if math.isnan(energy[r]) else energy[r] + joules
    return energy


def _picks(rows: list[dict[str, str]], fleet: RunFleet) -> Picks:
    code = {s: 1 + i for i, s in enumerate(STATUSES)}
    return Picks(
        np.array([fleet.position.get(row.get("device", ""), -1) for row in rows], dtype=np.int64),
        np.array([int(row["round"]) for row in rows], dtype=np.int64),
        np.array([code.get(row.get("status", ""), NOT_PICKED) for row in rows], dtype=np.int8),
    )


def time_to_target(run: Run, target: float) -> Reached:
    """The first evaluation at or above `target` (day 0 counts: a model may start there)."""
    for evaluation in run.evaluations:
        if evaluation.accuracy >= target:
            return Reached(target, evaluation)
    return Reached(target, None)


def jain_index(counts: list[int] | np.ndarray, n: int | None = None) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = all equal, 1/n = one takes all.

    `n`: the population the counts are of, when only the non-zero ones are given
    (a device never picked adds nothing to either sum, only to n).
    """
    x = np.asarray(counts, dtype=np.float64)
    n = len(x) if n is None else n
    if n == 0 or not np.any(x):
        return math.nan
    return float(x.sum() ** 2 / (n * np.square(x).sum()))


def participation_fairness(run: Run) -> float:
    """Jain's index over how often each device of the fleet was picked (never = 0)."""
    return jain_index(list(run.selections.values()), run.fleet.size)
