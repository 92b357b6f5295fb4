"""Write calibration/report.md and calibration/report.csv from a fit."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checks import Check
from rows import Row, mape

from fedbench.devices.constants import Constants
from fedbench.devices.emulator import emulate
from fedbench.devices.profile import initial_state, load_profile
from fedbench.measure.workload import Workload

COLUMNS = (
    "device",
    "model",
    "zoo_model",
    "input",
    "batch",
    "trainable",
    "optimizer",
    "framework",
    "config",
    "measured_ms",
    "predicted_ms",
    "error_pct",
    "measured_peak_res_mb",
    "predicted_peak_mb",
    "measured_cpu_pct",
    "predicted_busy_cores",
    "predicted_power_w",
)


def _row_records(
    rows: Sequence[Row], loads: Sequence[Workload], consts: Constants, pred: Sequence[float]
) -> list[dict[str, Any]]:
    out = []
    for row, w, p in zip(rows, loads, pred, strict=True):
        profile = load_profile(row.device)
        e = emulate(profile, [(w, 1)], initial_state(profile, 0.0), row.knobs, consts)
        out.append(
            {
                "device": row.device,
                "model": row.model,
                "zoo_model": row.zoo_model,
                "input": "x".join(map(str, row.input_shape)),
                "batch": row.batch,
                "trainable": row.trainable,
                "optimizer": row.optimizer,
                "framework": row.framework,
                "config": row.config,
                "measured_ms": round(1000 * row.measured_s, 1),
                "predicted_ms": round(1000 * p, 1),
                "error_pct": round(100 * (p - row.measured_s) / row.measured_s, 1),
                "measured_peak_res_mb": row.peak_res_mb,
                "predicted_peak_mb": round(e.peak_mem_mb, 1),
                "measured_cpu_pct": row.cpu_pct,
                "predicted_busy_cores": round(e.busy_cores, 2),
                "predicted_power_w": round(e.avg_power_w, 2),
            }
        )
    return out


def _md_table(header: Sequence[str], body: Sequence[Sequence[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in body]
    return lines


def write(
    rows: Sequence[Row],
    loads: Sequence[Workload],
    consts: Constants,
    pred: Sequence[float],
    params: Sequence[tuple[Any, float]],
    fixed: Mapping[str, float],
    checks: Sequence[Check],
    out_dir: Path,
) -> None:
    records = _row_records(rows, loads, consts, pred)
    with (out_dir / "report.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(records)

    errors = [r["error_pct"] for r in records]
    devices = sorted({r["device"] for r in records})
    lines = [
        "# Emulator calibration report",
        "",
        "Written by `python calibration/fit.py` (do not edit). Measured rows:",
        "`../shared/calibration/training_measurements.csv`; the fitted constants are in",
        "`fedbench/devices/fitted_constants.yaml`; per-row figures in `report.csv`.",
        "",
        "Every prediction is the emulator's own output (`fedbench.devices.emulator.emulate`,",
        "one step from the idle state) for the real workload of the real zoo model at the",
        "row's input, batch, optimizer and trainable set, with the row's core/clock setting",
        "as knobs. The fit uses a small set of shared constants - never one per row.",
        "",
        "## Latency error",
        "",
        f"**Overall latency MAPE: {mape(errors):.1f}%** over {len(errors)} rows.",
        "",
    ]
    lines += _md_table(
        ["device", "rows", "MAPE %", "max |error| %"],
        [
            [d, len(es), f"{mape(es):.1f}", f"{max(abs(e) for e in es):.1f}"]
            for d in devices
            for es in [[r["error_pct"] for r in records if r["device"] == d]]
        ],
    )
    lines += ["", "## Fitted constants", ""]
    lines += _md_table(
        ["constant", "value", "prior centre", "identified by"],
        [[p.path, f"{v:.4g}", f"{p.guess:g}", p.identified_by] for p, v in params],
    )
    lines += [
        "",
        "Fixed (not identifiable from the rows): "
        + ", ".join(f"`{k}` = {v:g}" for k, v in fixed.items())
        + ".",
        "Per-architecture FLOPs/cycle and the in-order pipeline factor are specs and",
        "assumptions (`fedbench/devices/arch_specs.yaml`), not fitted: no in-order core has",
        "a calibration row. The in-order factor"
        f" ({consts.archs.pipeline_efficiency.get('inorder', float('nan')):g}) was first set",
        "to 0.5 and revised on a kernel-scheduling argument after the paper 001 LITTLE-core",
        "checks below had been looked at, so those checks are not fully blind.",
        "",
        "## Rows",
        "",
    ]
    lines += _md_table(
        [
            "device",
            "zoo model",
            "batch",
            "trainable",
            "measured ms",
            "predicted ms",
            "error %",
            "RES MB (meas.)",
            "peak MB (pred.)",
            "CPU % (meas.)",
            "busy cores (pred.)",
            "power W (pred.)",
        ],
        [
            [
                r["device"],
                r["zoo_model"],
                r["batch"],
                r["trainable"],
                r["measured_ms"],
                r["predicted_ms"],
                r["error_pct"],
                r["measured_peak_res_mb"],
                r["predicted_peak_mb"],
                r["measured_cpu_pct"],
                r["predicted_busy_cores"],
                r["predicted_power_w"],
            ]
            for r in records
        ],
    )
    meizu = [r for r in records if r["device"] == "meizu_16t"]
    low = min(meizu, key=lambda r: r["predicted_power_w"])
    high = max(meizu, key=lambda r: r["predicted_power_w"])
    lines += [
        "",
        "Peak memory: the predicted peak is the training tensors only (weights, gradients,",
        "optimizer state, saved activations, workspace, batch); MNN's resident set adds its",
        "runtime and its own buffers, so RES runs 2-5x above it. Busy cores count spinning",
        "threads as busy in parallel phases, like `top`.",
        "",
        "Whole-device power on the Meizu rows (published: about 2.0-4.7 W during training,",
        f"LeNet lowest, MobileNetV2 batch 16 highest): predicted {low['predicted_power_w']} W"
        f" ({low['zoo_model']} batch {low['batch']}) to {high['predicted_power_w']} W"
        f" ({high['zoo_model']} batch {high['batch']}).",
        "",
        "## Out-of-sample checks (not fitted)",
        "",
    ]
    lines += _md_table(
        ["check", "source", "published", "predicted", "note"],
        [[c.name, c.source, c.published, c.predicted, c.note] for c in checks],
    )
    lines += [
        "",
        "## Known gaps",
        "",
        "- CPU training only: the Jetson GPUs (and mobile GPUs) are not emulated, so the",
        "  TX2 figures of paper 000 (GPU) are only a lower-bound comparison.",
        "- Four op classes cannot tell Winograd-friendly 3x3/5x5 convolutions from others:",
        "  MNN's GoogLeNet runs faster per FLOP than its AlexNet, so with one shared dense",
        "  efficiency GoogLeNet is predicted too slow (up to +44%) and AlexNet too fast",
        "  (down to -26%).",
        "- Frameworks differ by more than a speed factor on older boards: paper 001's",
        "  PyTorch on the Raspberry Pi 3B+ is ~10x slower than this PyTorch constant",
        "  (fitted on a Raspberry Pi 4 with PyTorch 1.13) predicts.",
        "- Phones at their default governor are emulated at their top clocks until the",
        "  thermal model throttles them; the Note 10 times of paper 001 (close to the",
        "  Meizu rows at a fixed 1.7 GHz) suggest the phone ran lower clocks.",
        "- Peak memory counts training tensors only (MNN's resident set is 2-5x larger);",
        "  training budgets in the profiles are defined for those tensors.",
    ]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
