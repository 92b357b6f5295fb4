"""A run on the GPU costs every emulated device exactly what a CPU run does (needs CUDA).

The host's accelerator changes wall time only: rounds.csv's emulated columns
are identical between runtime.accelerator=cpu and cuda for one seed; losses
differ by what other kernels and batching change (a stated tolerance).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from tests.helpers import run_fedbench

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

# Everything the emulator computes for a device's round (not the host's wall time, the
# worker, the loss, or the plan column, which says whether the step was batched).
EMULATED = (
    "round", "day", "device", "profile", "kind", "status", "num_examples", "latency_s",
    "comm_s", "round_trip_s", "start_s", "end_s", "energy_j", "comm_energy_j", "avg_power_w",
    "peak_mem_mb", "mem_budget_mb", "temp_c_start", "temp_c_end", "freq_ghz_avg",
    "throttled_frac", "battery_pct_start", "battery_pct", "model_version", "staleness",
)  # fmt: skip
LOSS_TOLERANCE = 0.05  # absolute, on a device's mean cross-entropy (~0.2-0.7 in smoke's rounds)


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "rounds.csv").open() as f:
        return sorted(csv.DictReader(f), key=lambda r: (int(r["round"]), r["device"]))


def test_cpu_and_cuda_runs_cost_the_same(tmp_path: Path) -> None:
    runs = {}
    for accelerator in ("cpu", "cuda"):
        run_dir = tmp_path / accelerator
        # mixed8: emulated devices (smoke's own fleet is the host, whose latency is real)
        args = ["experiment=smoke", "fleet=mixed8", "seed=3", f"runtime.accelerator={accelerator}"]
        proc = run_fedbench(args, run_dir, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[accelerator] = _rows(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["provenance"]["accelerator"] == accelerator
    assert summary["provenance"]["gpus"] and summary["provenance"]["cuda"]
    cpu, gpu = runs["cpu"], runs["cuda"]
    assert len(cpu) == len(gpu) > 0
    for a, b in zip(cpu, gpu, strict=True):
        assert {k: a[k] for k in EMULATED} == {k: b[k] for k in EMULATED}
        if a["train_loss"] and b["train_loss"]:
            assert math.isclose(
                float(a["train_loss"]), float(b["train_loss"]), abs_tol=LOSS_TOLERANCE
            )
