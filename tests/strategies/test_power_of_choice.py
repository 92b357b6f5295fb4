from __future__ import annotations

import numpy as np

from strategies.power_of_choice import PowerOfChoice
from tests.strategies.ledgers import blank, trained


def test_picks_highest_loss_when_every_device_is_a_candidate() -> None:
    ledger = blank(20)
    loss = np.random.default_rng(0).permutation(np.arange(20.0))
    trained(ledger, np.arange(20), 1, loss=loss)
    chosen = PowerOfChoice(3, seed=0, candidate_factor=7.0).select(ledger, 2, 0.0)
    assert sorted(loss[chosen].tolist()) == [17.0, 18.0, 19.0]


def test_never_trained_devices_count_as_infinite_loss() -> None:
    ledger = blank(20)
    trained(ledger, np.arange(18), 1, loss=100.0)
    chosen = PowerOfChoice(3, seed=0, candidate_factor=7.0).select(ledger, 2, 0.0)
    assert {18, 19} <= set(chosen.tolist())


def test_highest_loss_among_sampled_candidates_only() -> None:
    ledger = blank(20)
    trained(ledger, np.arange(20), 1, loss=np.arange(20.0))
    strategy = PowerOfChoice(1, seed=0, candidate_factor=2.0)
    counts = np.zeros(20)
    for r in range(400):
        counts[strategy.select(ledger, r, 0.0)] += 1
    assert counts[0] == 0  # the lowest loss never beats the other candidate
    assert 0 < counts[19] < 400  # the highest only wins when it is a candidate (~10%)
    assert np.all(np.diff(counts[::4]) > 0)  # more loss, more rounds


def test_candidates_are_drawn_by_data_size() -> None:
    ledger = blank(10)
    trained(ledger, np.arange(10), 1, loss=1.0, examples=10.0)
    ledger.num_examples[0] = 900.0
    strategy = PowerOfChoice(1, seed=0, candidate_factor=1.0)  # d = k: size-weighted sampling
    counts = np.zeros(10)
    for r in range(1000):
        counts[strategy.select(ledger, r, 0.0)] += 1
    assert 0.85 < counts[0] / 1000 < 0.95  # 900 / 990
