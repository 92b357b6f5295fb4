"""The calibration rows: published measurements mapped onto fedbench emulations.

Each row of calibration/data/training_measurements.csv becomes a `Row`:
the device profile, the zoo model and input, the batch, optimizer and
trainable set, the knobs of the measured setup (calibration/setups.yaml),
the measured seconds per step and, where published, the seconds of the
forward pass alone (MNN's inference timing of the same run), the
whole-device power during training and before it (the energy rows) and
the GPU's utilisation (paper 000's tegrastats figures). `workload`
measures the real zoo model for a row (cached under fedbench's cache dir).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fedbench.devices.knobs import Knobs
from fedbench.errors import FedbenchError
from fedbench.measure.workload import Workload, measure_workload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_CSV = HERE / "data" / "training_measurements.csv"


@dataclass(frozen=True)
class Row:
    device: str
    model: str  # as published
    zoo_model: str  # fedbench.models name
    input_shape: tuple[int, ...]
    batch: int
    config: str
    framework: str
    optimizer: str
    trainable: str
    knobs: Knobs
    measured_s: float
    forward_s: float | None  # forward pass alone (eval mode), where published
    peak_res_mb: float | None
    cpu_pct: float | None
    source: str
    power_w: float | None = None  # whole device, mean over the training run
    idle_w: float | None = None  # whole device, idle before the runs
    gpu_util: float | None = None  # share of the step the GPU runs kernels

    @property
    def energy_j(self) -> float | None:
        """Measured energy of one step above idle (what the run adds to the device's draw)."""
        if self.power_w is None or self.idle_w is None:
            return None
        return (self.power_w - self.idle_w) * self.measured_s


def _num(text: str) -> float | None:
    return float(text) if text.strip() else None


def _ms(text: str) -> float | None:
    value = _num(text)
    return None if value is None else value / 1000.0


def _pct(text: str) -> float | None:
    value = _num(text)
    return None if value is None else value / 100.0


def _head_trainable(model: str, setups: dict[str, Any]) -> str:
    return f"last:{setups.get('head_modules', {}).get(model, 1)}"


def load_rows(csv_path: Path = DEFAULT_CSV, setups_path: Path = HERE / "setups.yaml") -> list[Row]:
    setups = yaml.safe_load(setups_path.read_text())
    rows: list[Row] = []
    with csv_path.open() as f:
        for i, r in enumerate(csv.DictReader(f), start=2):
            where = f"{csv_path}:{i}"
            fw = setups["frameworks"].get(r["framework"])
            cfg = setups["configs"].get(r["config"])
            if fw is None or cfg is None:
                raise FedbenchError(
                    f"{where}: no mapping in setups.yaml for {r['framework']!r} / {r['config']!r}"
                )
            trainable = cfg["trainable"]
            if trainable == "head":
                trainable = _head_trainable(r["model"], setups)
            rows.append(
                Row(
                    device=r["device"],
                    model=r["model"],
                    zoo_model=fw["models"].get(r["model"], r["model"]),
                    input_shape=tuple(int(d) for d in r["input"].split("x")),
                    batch=int(r["batch"]),
                    config=r["config"],
                    framework=fw["framework"],
                    optimizer=fw["optimizer"],
                    trainable=trainable,
                    knobs=Knobs.from_mapping({**cfg["knobs"], "framework": fw["framework"]}),
                    measured_s=float(r["train_ms_per_step"]) / 1000.0,
                    forward_s=_ms(r["infer_ms_per_batch"]),
                    peak_res_mb=_num(r["peak_res_mb"]),
                    cpu_pct=_num(r["cpu_pct"]),
                    source=r["source"],
                    power_w=_num(r["train_power_w"]),
                    idle_w=_num(r["idle_power_w"]),
                    gpu_util=_pct(r["gpu_util_pct"]),
                )
            )
    return rows


def workload(row: Row) -> Workload:
    from fedbench.models import build_model

    model, _ = build_model(row.zoo_model)
    return measure_workload(
        model,
        row.input_shape,
        row.batch,
        model_name=row.zoo_model,
        optimizer=row.optimizer,
        trainable=row.trainable,
    )


def mape(errors_pct: list[float]) -> float:
    return sum(abs(e) for e in errors_pct) / len(errors_pct) if errors_pct else math.nan
