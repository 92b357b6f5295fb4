"""The committed calibration: within target, and reproduced by the shipped emulator."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from fedbench.devices.constants import FITTED_FILE, load_constants
from fedbench.devices.emulator import emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import initial_state, load_profile
from fedbench.measure.workload import measure_workload
from fedbench.models import build_model

CALIBRATION = Path(__file__).resolve().parents[2] / "calibration"


def _records() -> list[dict[str, str]]:
    with (CALIBRATION / "report.csv").open() as f:
        return list(csv.DictReader(f))


def test_latency_mape_within_target_and_recorded() -> None:
    errors = [abs(float(r["error_pct"])) for r in _records()]
    mape = sum(errors) / len(errors)
    assert len(errors) >= 35 and mape <= 20.0
    recorded = float(load_constants().fitted.fit["latency_mape_pct"])
    assert recorded == pytest.approx(mape, abs=0.1)
    assert f"**Overall latency MAPE: {recorded:.1f}%**" in (CALIBRATION / "report.md").read_text()


def test_fitted_constants_are_physical() -> None:
    fitted = load_constants().fitted
    assert all(
        0 < e.compute_eff <= 1 and 0 < e.bandwidth_eff <= 1 for e in fitted.op_class.values()
    )
    assert set(fitted.framework) == {"mnn", "pytorch"}
    assert "generated_by" in yaml.safe_load(FITTED_FILE.read_text())["fit"]


@pytest.mark.parametrize("model", ["lenet_mnn", "mobilenetv3_small"])
def test_shipped_emulator_reproduces_the_report(model: str) -> None:
    setups = yaml.safe_load((CALIBRATION / "setups.yaml").read_text())
    rows = [r for r in _records() if r["zoo_model"] == model]
    assert rows
    net, _ = build_model(model)
    for r in rows:
        knobs = Knobs.from_mapping(
            {**setups["configs"][r["config"]]["knobs"], "framework": r["framework"]}
        )
        shape = tuple(int(d) for d in r["input"].split("x"))
        w = measure_workload(
            net,
            shape,
            int(r["batch"]),
            model_name=model,
            optimizer=r["optimizer"],
            trainable=r["trainable"],
        )
        profile = load_profile(r["device"])
        e = emulate(profile, [(w, 1)], initial_state(profile, 0.0), knobs)
        assert 1000 * e.latency_s == pytest.approx(float(r["predicted_ms"]), rel=0.01, abs=0.1)
