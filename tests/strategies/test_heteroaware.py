from __future__ import annotations

import numpy as np

from fedbench.ledger import STATUS_CODE, Ledger
from strategies.heteroaware import HeteroAware
from tests.strategies.ledgers import blank, trained


def _twins(n: int) -> Ledger:
    """n explored devices, identical in every figure (utility 100, 50 J, 10 s)."""
    ledger = blank(n)
    trained(ledger, np.arange(n), 1, loss=1.0)
    ledger.energy_j[:] = 50.0
    ledger.round_trip_s[:] = 10.0
    ledger.throttle_temp_c[:] = 70.0
    ledger.temp_c[:] = 35.0
    ledger.state_time_s[:] = 0.0
    ledger.mem_budget_mb[:] = 1000.0
    ledger.pred_peak_mem_mb[:] = 500.0
    return ledger


def test_prefers_utility_per_joule() -> None:
    ledger = _twins(3)
    ledger.utility[:] = [100.0, 100.0, 300.0]
    ledger.energy_j[:] = [100.0, 50.0, 100.0]
    strategy = HeteroAware(1, clip_percentile=100.0)
    # At round 1 the staleness bonus is 0: score = reliability (U / 300) / (e / median e),
    # reliability (1 ok + 1) / (1 picked + 2) = 2/3 for all three.
    expected = np.array([1 / 3, 2 / 3, 1.0]) * 2 / 3
    assert np.allclose(strategy.scores(ledger, np.arange(3), 1, 0.0), expected)
    assert HeteroAware(2, clip_percentile=100.0).select(ledger, 1, 0.0).tolist() == [1, 2]


def test_avoids_a_hot_device_until_it_has_cooled() -> None:
    ledger = _twins(2)
    ledger.temp_c[0] = 70.0  # at its trip point when its last round ended, at t = 0
    strategy = HeteroAware(1, seed=0)
    assert strategy.slowdown(ledger, np.arange(2), 0.0).tolist() == [1.5, 1.0]
    for seed in range(5):
        assert HeteroAware(1, seed=seed).select(ledger, 3, 0.0).tolist() == [1]
    # An hour later (tau = 300 s) it is back near ambient: no penalty left.
    assert np.isclose(strategy.slowdown(ledger, np.array([0]), 3600.0)[0], 1.0)


def test_thermal_slowdown_can_push_a_device_past_the_deadline() -> None:
    ledger = _twins(3)
    ledger.temp_c[0] = 70.0
    strategy = HeteroAware(3, deadline_s=12.0)  # 10 s cool, 15 s throttled
    assert strategy.select(ledger, 2, 0.0).tolist() == [1, 2]


def test_never_picks_memory_infeasible_low_battery_or_unavailable_devices() -> None:
    ledger = _twins(8)
    ledger.pred_peak_mem_mb[0] = 1200.0  # predicted over budget
    ledger.last_status[1] = STATUS_CODE["oom"]  # ran out of memory last time
    ledger.battery_pct[2] = 5.0
    ledger.available[3] = False
    ledger.utility[:4] = 1e6  # the most useful ones, all excluded
    for r in range(2, 10):
        chosen = HeteroAware(4, seed=r).select(ledger, r, 0.0)
        assert chosen.tolist() == [4, 5, 6, 7]


def test_low_battery_and_unreliable_devices_score_lower() -> None:
    ledger = _twins(4)
    ledger.battery_pct[:] = [100.0, 20.0, np.nan, 100.0]
    ledger.selected[3] += 4  # picked 5 times, delivered once
    s = HeteroAware(1).scores(ledger, np.arange(4), 3, 0.0)
    assert s[0] == s[2]  # no battery figure: mains, no penalty
    assert np.isclose(s[1], s[0] / 1.8)  # 1 + 1.0 * (1 - 0.2)
    assert np.isclose(s[3], s[0] * (2 / 7) / (2 / 3))  # reliability (1+1)/(5+2) vs (1+1)/(1+2)


def test_explores_never_picked_devices_cheapest_first() -> None:
    ledger = _twins(40)
    ledger.selected[20:] = 0  # 20-39 never picked...
    ledger.utility[20:] = np.nan
    ledger.pred_energy_j[20:30] = 10.0  # ...20-29 predicted cheap
    ledger.pred_energy_j[30:] = 1e5  # ...30-39 predicted expensive
    ledger.energy_j[20:] = np.nan
    chosen = HeteroAware(10, seed=0, explore_fraction=0.3).select(ledger, 2, 0.0)
    new = chosen[chosen >= 20]
    assert len(new) == 3 and np.all(new < 30)


def test_fresh_fleet_explores_everything() -> None:
    ledger = blank(30)
    ledger.pred_energy_j[:] = np.arange(1.0, 31.0)
    counts = np.zeros(30)
    strategy = HeteroAware(5, seed=0)
    for _ in range(200):
        counts[strategy.select(ledger, 1, 0.0)] += 1
    assert counts[:10].sum() > 2 * counts[20:].sum() > 0  # ~ 1 / predicted energy
