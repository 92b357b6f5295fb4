"""The server's predictions use the memory planner: a device that fits with a plan is not oom."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from fedbench.core.device import DeviceSpec
from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from fedbench.models import build_model
from fedbench.paths import profiles_dir
from fedbench.scenarios.daily import DailyScenario
from fedbench.server.fleet_view import FleetView
from tests.bad_inputs import _typed


def _tiny(folder: Path) -> str:
    data = yaml.safe_load((profiles_dir() / "rpi3bplus.yaml").read_text())
    data["name"] = "rpi3bplus_tiny"
    data["memory"]["train_budget_mb"] = 16  # the tiny CNN at batch 64 needs ~22 MB
    path = folder / "rpi3bplus_tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _predict(profile: str, mode: str) -> Ledger:
    devices = (
        DeviceSpec(0, "tiny-000", profile, "emulated"),
        DeviceSpec(1, "rpi4-000", "rpi4", "emulated"),
    )
    experiment = _typed(["train.batch_size=64", f"train.memory_planner={mode}"])
    ledger = Ledger(devices)
    model, _ = build_model("small_cnn")
    scenario = DailyScenario(days=1, new_samples_per_day=64)
    view = FleetView(devices, experiment)  # type: ignore[arg-type]
    view.predict(ledger, model, experiment, scenario, None)  # type: ignore[arg-type]
    return ledger


def test_off_predicts_oom_auto_predicts_the_plans_cost(tmp_path: Path) -> None:
    profile = _tiny(tmp_path)
    off = _predict(profile, "off")
    assert off.pred_peak_mem_mb[0] > off.mem_budget_mb[0] == 16
    assert np.isinf(off.pred_latency_s[0]) and np.isinf(off.pred_energy_j[0])
    auto = _predict(profile, "auto")
    assert auto.pred_peak_mem_mb[0] <= auto.mem_budget_mb[0]
    assert math.isfinite(auto.pred_latency_s[0]) and math.isfinite(auto.pred_energy_j[0])
    # The roomy device is predicted the same either way (the full batch fits).
    assert auto.pred_latency_s[1] == off.pred_latency_s[1]


def test_a_bad_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match=r"train.memory_planner='on': valid: auto, off"):
        _predict(_tiny(tmp_path), "on")
