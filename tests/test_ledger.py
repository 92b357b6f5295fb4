from __future__ import annotations

import math

import numpy as np

from fedbench.core.device import DeviceState
from fedbench.core.records import RoundReport
from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import STATUS_CODE, Ledger


def test_record_folds_reports_in() -> None:
    devices = expand_fleet({"devices": [{"profile": "host", "count": 3}]})
    ledger = Ledger(devices)
    index_of = {d.name: d.index for d in devices}
    ok = RoundReport(
        1,
        1,
        5,
        "host-000",
        "host",
        "host",
        "ok",
        num_examples=32,
        train_loss=0.5,
        latency_s=2.0,
        energy_j=4.0,
    )
    oom = RoundReport(1, 1, 6, "host-002", "host", "host", "oom", peak_mem_mb=900.0)
    ledger.record([ok, oom], index_of)
    assert ledger.participation.tolist() == [1, 0, 0]
    assert ledger.selected.tolist() == [1, 0, 1]
    assert ledger.failures.tolist() == [0, 0, 1]
    assert ledger.last_status[2] == STATUS_CODE["oom"]
    assert ledger.utility[0] == 16.0 and math.isnan(ledger.utility[2])
    assert ledger.peak_mem_mb[2] == 900.0
    assert np.isnan(ledger.latency_s[1])
    assert ledger.total_energy_j.tolist() == [4.0, 0.0, 0.0]


def test_state_round_trip() -> None:
    ledger = Ledger(expand_fleet({"devices": [{"profile": "host", "count": 2}]}))
    assert ledger.state(0) is None
    ledger.set_state(1, DeviceState(41.5, 80.0, 3600.0))
    assert ledger.state(1) == DeviceState(41.5, 80.0, 3600.0)


def _touched_ledger(n: int) -> tuple[Ledger, dict[str, int]]:
    devices = expand_fleet({"devices": [{"profile": "host", "count": n}]})
    ledger = Ledger(devices)
    ledger.pred_latency_s[:] = np.arange(n, dtype=float)  # as the server predicts at start
    ledger.battery_pct[:] = 50.0
    index_of = {devices[i].name: i for i in (3, n - 1)}
    ledger.record(
        [
            RoundReport(1, 1, 0, devices[3].name, "host", "host", "ok", 32, 0.5, plan="bs8"),
            RoundReport(1, 1, 1, devices[n - 1].name, "host", "host", "timeout", energy_j=2.0),
        ],
        index_of,
    )
    ledger.set_state(7, DeviceState(40.0, 61.0, 10.0))
    ledger.battery_pct[:] -= 1.0  # the clock drains every battery
    return ledger, index_of


def test_a_checkpoint_holds_the_touched_devices_and_the_batteries() -> None:
    ledger, _ = _touched_ledger(10_000)
    state = ledger.state_dict()
    assert state["touched"].tolist() == [3, 7, 9_999]  # type: ignore[union-attr]
    assert state["selected"].shape == (3,)  # type: ignore[union-attr]
    assert state["battery_pct"].shape == (10_000,)  # type: ignore[union-attr]
    assert "pred_latency_s" in state and state["pred_latency_s"].shape == (3,)  # type: ignore[union-attr]
    # Resumed onto a ledger set up as the run's was at its start: the same ledger.
    resumed = Ledger(ledger.devices)
    resumed.pred_latency_s[:] = np.arange(10_000, dtype=float)
    resumed.load_state_dict(state)
    for name in ledger.columns():
        assert np.array_equal(getattr(resumed, name), getattr(ledger, name), equal_nan=True), name
    assert resumed.plan == ledger.plan and resumed.plan[3] == "bs8"
    assert np.array_equal(resumed.touched, ledger.touched)


def test_a_checkpoint_of_every_column_whole_still_loads() -> None:
    ledger, _ = _touched_ledger(20)
    whole: dict[str, object] = {name: getattr(ledger, name).copy() for name in ledger.columns()}
    whole["plan"] = "\n".join(ledger.plan)
    resumed = Ledger(ledger.devices)
    resumed.load_state_dict(whole)
    assert resumed.selected.tolist() == ledger.selected.tolist()
    assert resumed.touched.all()  # everything is saved from then on
