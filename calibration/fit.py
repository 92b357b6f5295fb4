"""Fit the emulator's shared constants to the published training measurements.

    python calibration/fit.py [--csv PATH]

writes fedbench/devices/fitted_constants.yaml, calibration/report.md and
calibration/report.csv.

Twelve shared parameters (never one per row) are fitted by least squares
on log(predicted / measured) step latency over every row, each with a weak
log-normal prior (a factor e^2 either way) that only matters for a
parameter the rows cannot pin down. Predictions go through the emulator
itself (`fedbench.devices.emulator.emulate`) with the real workload of the
real zoo model at each row's input, batch, optimizer and trainable set, so
the report is exactly what the emulator will say. Devices without
measurements get their numbers from their specs and these constants only.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rows import DEFAULT_CSV, ROOT, Row, load_rows, mape, workload  # noqa: E402

from fedbench.devices.constants import (  # noqa: E402
    FITTED_FILE,
    Constants,
    load_arch_table,
    parse_fitted,
)
from fedbench.devices.emulator import emulate  # noqa: E402
from fedbench.devices.profile import initial_state, load_profile  # noqa: E402
from fedbench.measure.workload import Workload  # noqa: E402

PRIOR_SIGMA = 2.0  # in ln units: the prior allows a factor ~7 either way


@dataclass(frozen=True)
class Param:
    path: str  # dotted path in fitted_constants.yaml ("*" = every framework)
    guess: float  # prior centre
    upper: float  # physical upper bound
    identified_by: str


PARAMS: tuple[Param, ...] = (
    Param("op_class.dense.compute_eff", 0.3, 1.0, "large-batch conv/matmul rows (all models)"),
    Param("op_class.depthwise.compute_eff", 0.05, 1.0, "MobileNetV2/V3, EfficientNet rows"),
    Param("op_class.dense.bandwidth_eff", 0.3, 1.0, "batch-1 AlexNet (weight streaming)"),
    Param("op_class.depthwise.bandwidth_eff", 0.3, 1.0, "MobileNet rows"),
    Param("op_class.elementwise.bandwidth_eff", 0.3, 1.0, "BN/activation-heavy rows"),
    Param("op_class.movement.bandwidth_eff", 0.3, 1.0, "GoogLeNet concat, ViT reshapes"),
    Param("optimizer.bandwidth_eff", 0.3, 1.0, "AlexNet small batches (61M-param update)"),
    Param("parallel_half_work_gflop", 0.5, 1000.0, "MNN batch sweeps (throughput vs batch)"),
    Param("framework.pytorch.speed", 0.5, 10.0, "rpi4 rows vs the MNN reference"),
    Param("framework.mnn.step_overhead_mcycles", 10.0, 1e5, "LeNet batch 1"),
    Param("framework.pytorch.step_overhead_mcycles", 10.0, 1e5, "small rpi4 fine-tune rows"),
    Param("framework.*.input_cycles_per_byte", 10.0, 1e4, "MNN batch sweeps at 224x224 vs 28x28"),
)
FIXED: dict[str, float] = {
    # Memory-bound everywhere in the rows, so not identifiable: a low compute
    # efficiency that never binds on big cores.
    "op_class.elementwise.compute_eff": 0.1,
    "op_class.movement.compute_eff": 0.1,
    "optimizer.compute_eff": 0.1,
    # The reference framework: the other frameworks' speed is relative to it.
    "framework.mnn.speed": 1.0,
}
FRAMEWORKS = ("mnn", "pytorch")


def _set(tree: dict[str, Any], path: str, value: float) -> None:
    parts = path.split(".")
    targets = FRAMEWORKS if "*" in parts else ("*",)
    for fw in targets:
        keys = [fw if p == "*" else p for p in parts]
        node = tree
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = float(value)


def fitted_tree(values: np.ndarray, meta: dict[str, str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path, v in FIXED.items():
        _set(tree, path, v)
    for p, v in zip(PARAMS, values, strict=True):
        _set(tree, p.path, float(v))
    tree["fit"] = meta
    return tree


def constants_of(values: np.ndarray) -> Constants:
    return Constants(load_arch_table(), parse_fitted(fitted_tree(values, {}), "<fit>"))


def predict(rows: list[Row], loads: list[Workload], consts: Constants) -> np.ndarray:
    out = []
    for row, w in zip(rows, loads, strict=True):
        profile = load_profile(row.device)
        e = emulate(profile, [(w, 1)], initial_state(profile, 0.0), row.knobs, consts)
        out.append(e.latency_s)
    return np.array(out)


def fit(rows: list[Row], loads: list[Workload]) -> np.ndarray:
    measured = np.log([r.measured_s for r in rows])
    guess = np.log([p.guess for p in PARAMS])

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = np.log(predict(rows, loads, constants_of(np.exp(x))))
        return np.concatenate([pred - measured, (x - guess) / PRIOR_SIGMA])

    lower = np.full(len(PARAMS), math.log(1e-4))
    upper = np.log([p.upper for p in PARAMS])
    sol = least_squares(residuals, np.clip(guess, lower, upper), bounds=(lower, upper))
    return np.exp(sol.x)


def write_constants(values: np.ndarray, errors: list[float], csv_path: Path) -> None:
    meta = {
        "generated_by": "calibration/fit.py (do not edit by hand)",
        "data": f"{csv_path.name}: {len(errors)} rows",
        "method": "least squares on log step latency, weak log-normal priors (sigma 2)",
        "latency_mape_pct": f"{mape(errors):.1f}",
        "report": "calibration/report.md",
    }
    header = (
        "# Fitted emulator constants: written by `python calibration/fit.py`, read by\n"
        "# fedbench.devices.constants. See calibration/report.md for the fit and its errors.\n"
    )
    body = yaml.safe_dump(fitted_tree(values, meta), sort_keys=False)
    FITTED_FILE.write_text(header + body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    rows = load_rows(args.csv)
    loads = [workload(r) for r in rows]
    values = np.array([float(f"{v:.5g}") for v in fit(rows, loads)])  # as written to YAML
    consts = constants_of(values)
    pred = predict(rows, loads, consts)
    errors = [100.0 * (p - r.measured_s) / r.measured_s for p, r in zip(pred, rows, strict=True)]
    write_constants(values, errors, args.csv)

    import checks
    import report

    report.write(
        rows,
        loads,
        consts,
        list(pred),
        [(p, v) for p, v in zip(PARAMS, values, strict=True)],
        FIXED,
        checks.run_all(consts),
        ROOT / "calibration",
    )
    print(f"latency MAPE {mape(errors):.1f}% over {len(rows)} rows; wrote {FITTED_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
