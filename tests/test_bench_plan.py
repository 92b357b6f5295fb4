"""`python -m fedbench.bench ... plan=`: a given plan, or the planner's per device."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from fedbench.bench import run, workload_of
from fedbench.devices.profile import parse_profile
from fedbench.errors import FedbenchError
from fedbench.paths import profiles_dir


def _bench(*args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(run(["device=rpi4", "model=small_cnn", *args]))
    return out


def test_a_given_plan_is_costed() -> None:
    full = _bench("batch_size=32")
    planned = _bench("batch_size=32", "plan=4x8+ckpt2")
    assert full["plan"] == "bs32" and planned["plan"] == "4x8+ckpt2"
    assert planned["peak_mem_mb"] < full["peak_mem_mb"]
    # Recompute costs compute and the four slices per-call time; the slices'
    # smaller im2col fits the cache, so the total can go either way.
    time_full, time_planned = full["breakdown"]["time_s"], planned["breakdown"]["time_s"]
    assert time_planned["dense"] > time_full["dense"]
    assert time_planned["dispatch"] > time_full["dispatch"]
    assert planned["gflop_per_step"] > full["gflop_per_step"]


def test_auto_plans_for_the_devices_budget() -> None:
    data = yaml.safe_load((profiles_dir() / "rpi3bplus.yaml").read_text())
    data["memory"]["train_budget_mb"] = 16  # the tiny CNN at batch 64 needs ~22 MB
    tiny = parse_profile(data, "tiny.yaml")
    args = {"model": "small_cnn", "batch_size": "64", "plan": "auto"}
    w = workload_of(args, tiny)
    assert w.plan == "2x32" and w.peak_bytes / 2**20 <= 16
    data["memory"]["train_budget_mb"] = 360
    assert workload_of(args, parse_profile(data, "roomy.yaml")).plan == "bs64"


@pytest.mark.parametrize(
    ("plan", "needle"),
    [("4x8", "4 micro-batches of 8 is not the batch size 16"), ("fast", "valid forms")],
)
def test_bad_plans_say_why(plan: str, needle: str) -> None:
    with pytest.raises(FedbenchError, match=needle):
        _bench("batch_size=16", f"plan={plan}")
