from __future__ import annotations

import numpy as np
import pytest

from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from strategies.fedcs import FedCS
from tests.strategies.ledgers import blank

# Greedy filling is tested on the whole fleet asked (the paper's C = 1); the request pool
# (request_fraction, 0.5 by default as in fedbench/conf/strategy/fedcs.yaml) is tested apart.
ALL = 1.0


def _fleet() -> Ledger:
    ledger = blank(10)
    ledger.pred_latency_s[:] = np.arange(10.0, 110.0, 10.0)[::-1]  # device 9 fastest
    ledger.pred_comm_s[:] = 0.0
    return ledger


def test_fills_the_deadline_and_stops() -> None:
    ledger = _fleet()
    chosen = FedCS(2, deadline_s=45.0, max_clients=10, request_fraction=ALL).select(ledger, 1, 0.0)
    assert chosen.tolist() == [6, 7, 8, 9]  # 40, 30, 20, 10 s fit; 50 s does not


def test_returns_more_or_fewer_than_clients_per_round() -> None:
    ledger = _fleet()
    assert (
        len(FedCS(2, deadline_s=1000.0, max_clients=6, request_fraction=ALL).select(ledger, 1, 0.0))
        == 6
    )
    assert len(FedCS(5, deadline_s=25.0, request_fraction=ALL).select(ledger, 1, 0.0)) == 2
    assert len(FedCS(5, deadline_s=5.0, request_fraction=ALL).select(ledger, 1, 0.0)) == 0


def test_measured_round_trip_overrides_prediction() -> None:
    ledger = _fleet()
    ledger.latency_s[9], ledger.round_trip_s[9] = 90.0, 95.0
    chosen = FedCS(2, deadline_s=45.0, max_clients=10, request_fraction=ALL).select(ledger, 1, 0.0)
    assert chosen.tolist() == [6, 7, 8]


def test_shared_uplink_uploads_take_turns() -> None:
    ledger = blank(6)
    ledger.pred_latency_s[:] = 10.0
    ledger.pred_comm_s[:] = 10.0  # 5 s down, 5 s up
    # Broadcast 5 s; then theta = 5 + 10 = 15, +5, +5 -> 5 + 25 = 30: three fit in 30 s.
    shared = FedCS(
        2, deadline_s=30.0, max_clients=6, shared_uplink=True, request_fraction=ALL
    ).select(ledger, 1, 0.0)
    assert len(shared) == 3
    parallel = FedCS(2, deadline_s=30.0, max_clients=6, request_fraction=ALL).select(ledger, 1, 0.0)
    assert len(parallel) == 6  # own links: every device takes 20 s


def test_random_resource_request_pool() -> None:
    ledger = blank(100)
    ledger.pred_latency_s[:] = np.arange(100.0)
    a = FedCS(2, deadline_s=1e9, max_clients=5, request_fraction=0.1, seed=0)
    picks = {tuple(a.select(ledger, r, 0.0).tolist()) for r in range(5)}
    assert len(picks) > 1  # the fastest of a different random 10% each round
    for pick in picks:
        assert len(pick) == 5


def test_unknown_devices_are_assumed_to_fit() -> None:
    chosen = FedCS(3, deadline_s=1.0, request_fraction=ALL).select(blank(5), 1, 0.0)
    assert len(chosen) == 3


def test_bad_parameters() -> None:
    with pytest.raises(FedbenchError, match="strategy.deadline_s must be"):
        FedCS(2, deadline_s=-1.0)
    with pytest.raises(FedbenchError, match="strategy.shared_uplink must be true or false"):
        FedCS(2, deadline_s=1.0, shared_uplink="yes")  # type: ignore[arg-type]


def test_the_class_default_is_the_configs() -> None:
    # One place for FedCS's defaults: the yaml and the class agreed on everything but this
    # until 2026-12-07 (the class asked every eligible device, the yaml half of them).
    import inspect

    import yaml

    from fedbench.paths import conf_dir

    conf = yaml.safe_load((conf_dir() / "strategy" / "fedcs.yaml").read_text())
    default = inspect.signature(FedCS).parameters["request_fraction"].default
    assert conf["request_fraction"] == default == 0.5
