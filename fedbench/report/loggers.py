"""Experiment trackers: a run's rounds and evaluations in TensorBoard or MLflow, as it goes.

`report.loggers=[tensorboard]` (or `[mlflow]`, or both) adds a logger next
to the run folder's own files; the server loop calls `log_round` after
every round with that round's rounds.csv rows, `log_evaluation` after every
evaluation and `close` at the end. Each logger writes through its
project's own package, installed as an extra (`pip install
'fedbench[tensorboard]'`, `'fedbench[mlflow]'`); fedbench runs without them.
A logger of your own is a `{_target_: my.module.MyLogger}` entry whose class
subclasses `RunLogger` and takes `run_dir`.

Steps are rounds. Per round: how many devices were picked and how their
rounds ended (`round/picked`, `round/ok`, `round/timeout`, ...), the
round's energy over the devices that measured it and its slowest round
trip, and per device its latency, energy, power, memory, temperature,
clock and battery (`device/<name>/<column>`); the round's rows as a table
(TensorBoard: a text table; MLflow: an artifact `rounds/round_NNNN.json`).
Per evaluation: every metric given (`eval/accuracy`, `eval/loss`, ...).
"""

from __future__ import annotations

import math
import os
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml

from fedbench.core.records import STATUSES
from fedbench.errors import FedbenchError, choices
from fedbench.report.nested import flatten
from fedbench.trust import bounded

# Per-device columns of rounds.csv worth a curve (the rest are names, plans, reasons).
DEVICE_METRICS: tuple[str, ...] = (
    "train_loss",
    "latency_s",
    "comm_s",
    "round_trip_s",
    "energy_j",
    "avg_power_w",
    "peak_mem_mb",
    "temp_c_end",
    "freq_ghz_avg",
    "throttled_frac",
    "battery_pct",
    "staleness",
)


def _finite(value: object) -> float | None:
    if value in ("", None) or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def round_metrics(rows: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """The per-round scalars of one round's rows (unknown figures are left out, never 0)."""
    statuses = Counter(str(row.get("status", "")) for row in rows)
    out: dict[str, float] = {"round/picked": float(len(rows))}
    out.update({f"round/{s}": float(statuses.get(s, 0)) for s in STATUSES})
    energy = [e for e in (_finite(row.get("energy_j")) for row in rows) if e is not None]
    if energy:
        out["round/energy_j"] = sum(energy)
    trips = [t for t in (_finite(row.get("round_trip_s")) for row in rows) if t is not None]
    if trips:
        out["round/slowest_round_trip_s"] = max(trips)
    for row in rows:
        device = str(row.get("device", "?"))
        for column in DEVICE_METRICS:
            value = _finite(row.get(column))
            if value is not None:
                out[f"device/{device}/{column}"] = value
    return out


def _config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.yaml"
    if not path.is_file():
        return {}
    # A resumed folder's: its size, nesting and aliases are checked before it is built.
    data = bounded.load_yaml(path, str(path), bounded.CONFIG_YAML)
    return data if isinstance(data, dict) else {}


class RunLogger(ABC):
    """Receives a run's rounds and evaluations; one subclass per tracker."""

    name: ClassVar[str]
    extra: ClassVar[str]  # the pip extra that installs the tracker's package

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    @abstractmethod
    def log_round(self, round: int, day: int, rows: Sequence[Mapping[str, object]]) -> None:
        """One round: its rounds.csv rows as dicts (snake_case keys)."""

    @abstractmethod
    def log_evaluation(self, round: int, day: int, metrics: Mapping[str, float]) -> None:
        """The global model after `round` (accuracy, loss, virtual_time_s, energy_j, ...)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release; the run has ended."""

    @classmethod
    def missing(cls, exc: ImportError) -> FedbenchError:
        return FedbenchError(
            f"report.loggers=[{cls.name}] needs the {cls.extra} package, which is not "
            f"installed ({exc}); install it with: pip install 'fedbench[{cls.extra}]'"
        )


class TensorBoardLogger(RunLogger):
    """TensorBoard event files in <run>/tensorboard (`tensorboard --logdir <run>/tensorboard`)."""

    name = "tensorboard"
    extra = "tensorboard"

    def __init__(self, run_dir: Path, log_dir: str | None = None) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise self.missing(exc) from None
        super().__init__(run_dir)
        self.log_dir = Path(log_dir) if log_dir else run_dir / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.log_dir))
        config = _config(run_dir)
        if config:
            text = yaml.safe_dump(config, sort_keys=False)
            self.writer.add_text("config", "```\n" + text + "\n```", 0)

    def log_round(self, round: int, day: int, rows: Sequence[Mapping[str, object]]) -> None:
        self.writer.add_scalar("round/day", day, round)
        for tag, value in round_metrics(rows).items():
            self.writer.add_scalar(tag, value, round)
        if rows:
            columns = list(rows[0])
            table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            table += [
                "| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows
            ]
            self.writer.add_text("rounds", "\n".join(table), round)
        self.writer.flush()

    def log_evaluation(self, round: int, day: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            number = _finite(value)
            if number is not None:
                self.writer.add_scalar(f"eval/{key}", number, round)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class MlflowLogger(RunLogger):
    """An MLflow run, with the config as parameters.

    Default store: `$MLFLOW_TRACKING_URI` if set (your own tracking server or
    store), else an SQLite file in the run folder
    (`mlflow ui --backend-store-uri sqlite:///<run>/mlflow.db`) with the
    artifacts in <run>/mlartifacts - no server. (MLflow 3 keeps its plain
    file store only behind an opt-out.)
    """

    name = "mlflow"
    extra = "mlflow"

    def __init__(
        self, run_dir: Path, tracking_uri: str | None = None, experiment: str | None = None
    ) -> None:
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise self.missing(exc) from None
        run_dir = run_dir.resolve()
        super().__init__(run_dir)
        self.tracking_uri = (
            tracking_uri
            or os.environ.get("MLFLOW_TRACKING_URI")
            or f"sqlite:///{run_dir / 'mlflow.db'}"
        )
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        config = _config(run_dir)
        name = experiment or str(config.get("name") or "fedbench")
        found = self.client.get_experiment_by_name(name)
        local = self.tracking_uri.startswith("sqlite:///") and tracking_uri is None
        experiment_id = (
            found.experiment_id
            if found
            else self.client.create_experiment(
                name, artifact_location=(run_dir / "mlartifacts").as_uri() if local else None
            )
        )
        run = self.client.create_run(experiment_id, run_name=run_dir.name)
        self.run_id = run.info.run_id
        # MLflow caps a parameter's value at 6000 characters and a batch at 100 parameters.
        params = [Param(k, str(v)[:6000]) for k, v in flatten(config).items()]
        for start in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[start : start + 100])
        self.client.set_tag(self.run_id, "fedbench.run_dir", str(run_dir))

    def _log(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [Metric(k, v, stamp, step) for k, v in values.items()]
        for start in range(0, len(metrics), 1000):  # MLflow's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def log_round(self, round: int, day: int, rows: Sequence[Mapping[str, object]]) -> None:
        self._log({"round/day": float(day), **round_metrics(rows)}, round)
        self.client.log_dict(
            self.run_id,
            {"round": round, "day": day, "rows": [dict(r) for r in rows]},
            f"rounds/round_{round:04d}.json",
        )

    def log_evaluation(self, round: int, day: int, metrics: Mapping[str, float]) -> None:
        values = {f"eval/{k}": v for k, v in metrics.items() if _finite(v) is not None}
        self._log({k: float(v) for k, v in values.items()}, round)

    def close(self) -> None:
        self.client.set_terminated(self.run_id, "FINISHED")


LOGGERS: dict[str, type[RunLogger]] = {
    TensorBoardLogger.name: TensorBoardLogger,
    MlflowLogger.name: MlflowLogger,
}


def build_loggers(names: Sequence[str | Mapping[str, Any]], run_dir: Path) -> list[RunLogger]:
    """The loggers `report.loggers` names (or `{_target_: ...}` entries), for this run folder."""
    out: list[RunLogger] = []
    for entry in names:
        if isinstance(entry, Mapping):
            out.append(_instantiate(entry, run_dir))
            continue
        cls = LOGGERS.get(str(entry))
        if cls is None:
            from fedbench.errors import closest

            raise FedbenchError(
                f"report.loggers: unknown logger {entry!r}{closest(str(entry), LOGGERS)}; "
                f"valid: {choices(LOGGERS)} (or a {{_target_: module.Class}} entry)"
            )
        out.append(cls(run_dir))
    return out


def _instantiate(entry: Mapping[str, Any], run_dir: Path) -> RunLogger:
    from hydra.utils import get_class

    params = dict(entry)
    target = params.pop("_target_", None)
    if not isinstance(target, str):
        raise FedbenchError(f"report.loggers: entry {dict(entry)!r} needs a _target_")
    try:
        cls = get_class(target)
    except Exception as exc:
        raise FedbenchError(f"report.loggers: _target_ {target}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, RunLogger)):
        raise FedbenchError(f"report.loggers: {target} is not a fedbench RunLogger")
    return cls(run_dir=run_dir, **params)
