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
