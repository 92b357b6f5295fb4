from __future__ import annotations

import numpy as np

from fedbench.ledger import Ledger
from strategies.eafl import EAFL
from tests.strategies.ledgers import blank, trained


def _fleet() -> Ledger:
    ledger = blank(60)
    trained(ledger, np.arange(60), 1, loss=1.0)
    ledger.round_trip_s[:] = 10.0
    ledger.battery_pct[:20] = 95.0
    ledger.battery_pct[20:40] = 30.0
    ledger.battery_pct[40:50] = 10.0  # below the floor
    # 50-59: no battery reported (mains-powered): count as full
    return ledger


def test_never_picks_below_the_battery_floor_and_prefers_charged_devices() -> None:
    ledger = _fleet()
    strategy = EAFL(10, seed=0, utility_weight=0.2, battery_floor_pct=20.0)
    counts = np.zeros(60)
    for _ in range(150):
        counts[strategy.select(ledger, 5, 0.0)] += 1
    assert counts[40:50].sum() == 0
    assert counts[:20].mean() > 1.5 * counts[20:40].mean()
    assert counts[50:].mean() > 1.5 * counts[20:40].mean()


def test_score_is_the_documented_blend() -> None:
    ledger = _fleet()
    idx = np.array([0, 20, 55])
    strategy = EAFL(2, utility_weight=0.25)
    oort = super(EAFL, strategy).exploit_scores(ledger, idx, 5, 10.0)
    expected = 0.25 * oort / oort.max() + 0.75 * np.array([0.95, 0.30, 1.0])
    assert np.allclose(strategy.exploit_scores(ledger, idx, 5, 10.0), expected)
