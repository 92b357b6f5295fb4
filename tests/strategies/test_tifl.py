from __future__ import annotations

import numpy as np

from fedbench.ledger import Ledger
from strategies.tifl import TiFL
from tests.strategies.ledgers import blank, trained


def _fleet(n: int = 100) -> Ledger:
    ledger = blank(n)
    ledger.pred_latency_s[:] = np.random.default_rng(0).permutation(np.arange(1.0, n + 1))
    return ledger


def test_tiers_are_latency_quantiles_and_follow_measurements() -> None:
    ledger = _fleet()
    strategy = TiFL(5, num_tiers=5)
    tier = strategy.tiers(ledger)
    assert np.bincount(tier).tolist() == [20, 20, 20, 20, 20]
    fastest = int(np.argmin(ledger.pred_latency_s))
    assert tier[fastest] == 0
    ledger.round_trip_s[fastest] = 500.0  # measured: it is slow
    assert strategy.tiers(ledger)[fastest] == 4


def test_picks_within_one_tier_and_visits_several() -> None:
    ledger = _fleet()
    ledger.available[::7] = False
    strategy = TiFL(8, seed=0, num_tiers=5)
    used = set()
    for r in range(1, 31):
        chosen = strategy.select(ledger, r, 0.0)
        tiers = set(strategy.tiers(ledger)[chosen].tolist())
        assert len(chosen) == 8 and len(tiers) == 1
        used |= tiers
    assert len(used) >= 4


def test_credits_bound_each_tier_until_refill() -> None:
    ledger = _fleet(40)
    strategy = TiFL(4, seed=0, num_tiers=4, credits=2, interval=1000)
    counts = np.zeros(5, dtype=int)
    for r in range(1, 9):
        chosen = strategy.select(ledger, r, 0.0)
        counts[strategy.tiers(ledger)[chosen[0]]] += 1
    assert counts.tolist() == [2, 2, 2, 2, 0]  # 4 tiers x 2 credits; no unprofiled devices
    strategy.select(ledger, 9, 0.0)  # all spent: refilled
    assert strategy.credits[:4].sum() == 4 * 2 - 1


def test_highest_loss_tier_gets_the_highest_probability() -> None:
    ledger = _fleet()
    strategy = TiFL(5, seed=0, num_tiers=5, interval=2, credits=1000)
    tier = strategy.tiers(ledger)
    trained(ledger, np.arange(100), 1, loss=np.where(tier == 3, 4.0, 1.0))
    ledger.train_loss[tier == 1] = 2.0
    strategy.select(ledger, 2, 0.0)  # re-ranked in round 2
    order = np.argsort(-strategy.probs[:5]).tolist()
    assert order[:2] == [3, 1]
    counts = np.zeros(6)
    for r in range(3, 200):
        chosen = strategy.select(ledger, r, 0.0)
        counts[strategy.tiers(ledger)[chosen[0]]] += 1
    assert counts[3] == counts.max() and counts[5] == 0
    assert counts[3] > 3 * counts[[0, 2, 4]].max()  # weights 5, 4 vs 1, 1, 1


def test_devices_without_any_time_form_the_unprofiled_tier() -> None:
    ledger = blank(30)
    ledger.pred_latency_s[:20] = np.arange(20.0)
    strategy = TiFL(5, seed=0, num_tiers=2)
    assert np.bincount(strategy.tiers(ledger)).tolist() == [10, 10, 10]
    everyone_unknown = TiFL(5, seed=0).select(blank(12), 1, 0.0)
    assert len(everyone_unknown) == 5


def test_too_small_tiers_take_the_nearest_latencies() -> None:
    ledger = _fleet(20)
    chosen = TiFL(6, seed=0, num_tiers=5).select(ledger, 1, 0.0)
    ranks = np.argsort(np.argsort(ledger.pred_latency_s))[chosen]
    assert len(chosen) == 6 and ranks.max() - ranks.min() == 5  # a contiguous latency window


def test_probabilities_change_only_when_the_last_tier_stops_improving() -> None:
    """At each interval, re-rank only if the tier trained last did not improve (the paper)."""
    ledger = _fleet()
    strategy = TiFL(5, seed=0, num_tiers=5, interval=2, credits=1000)
    tier = strategy.tiers(ledger)
    trained(ledger, np.arange(100), 1, loss=np.where(tier == 3, 4.0, 1.0))
    uniform = np.full(6, 1.0 / 6)
    for r in (1, 3):
        strategy.select(ledger, r, 0.0)
        ledger.train_loss[tier == strategy.last_tier] *= 0.9  # the tier that trained improved
        strategy.select(ledger, r + 1, 0.0)  # a check: the probabilities stay
        assert np.allclose(strategy.probs, uniform)
    strategy.select(ledger, 5, 0.0)  # this tier's loss stays as it was at the last check
    strategy.select(ledger, 6, 0.0)  # so the check re-ranks: the highest-loss tier leads
    assert int(np.argmax(strategy.probs)) == 3 and not np.allclose(strategy.probs, uniform)
