"""Devices picked but never finishing a round (always late) are not favoured forever."""

from __future__ import annotations

import numpy as np

from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import Ledger
from strategies.power_of_choice import PowerOfChoice
from strategies.tifl import TiFL


def _ledger() -> Ledger:
    ledger = Ledger(expand_fleet({"devices": [{"profile": "host", "count": 6}]}))
    ledger.num_examples[:] = 64
    ledger.round_trip_s[:] = [1.0, 1.1, 1.2, 1.3, 9.0, 9.5]
    ledger.train_loss[:4] = [0.5, 0.6, 0.7, 0.8]
    ledger.selected[:] = 3
    ledger.participation[:4] = 3  # devices 4 and 5: picked 3 times, always timed out
    return ledger


def test_power_of_choice_prefers_devices_that_finish() -> None:
    strategy = PowerOfChoice(2, seed=0, candidate_factor=3.0)  # all 6 are candidates
    for r in range(20):
        picked = set(strategy.select(_ledger(), r, 0.0).tolist())
        assert not picked & {4, 5}
    fresh = _ledger()
    fresh.selected[5] = 0  # never tried: explored first
    assert 5 in strategy.select(fresh, 21, 0.0).tolist()


def test_tifl_ranks_a_tier_that_never_finishes_last() -> None:
    strategy = TiFL(2, seed=0, num_tiers=3, interval=1)
    ledger = _ledger()
    tiers = strategy.tiers(ledger)
    slow = int(tiers[4])
    strategy.select(ledger, 1, 0.0)
    assert strategy.probs[slow] == np.min(strategy.probs[strategy.probs > 0])
