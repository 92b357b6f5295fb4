from __future__ import annotations

import numpy as np
import pytest

from fedbench.errors import FedbenchError
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


def test_rpow_d_takes_the_highest_last_loss_among_d_candidates_drawn_by_size() -> None:
    ledger = blank(40)
    trained(ledger, np.arange(40), 1, loss=np.arange(40.0), examples=1.0)
    ledger.num_examples[:10] = 1000.0  # devices 0-9: almost every draw, lowest losses
    strategy = PowerOfChoice(2, seed=0, d=4, variant="rpow-d")
    counts = np.zeros(40)
    for r in range(2, 302):
        counts[strategy.select(ledger, r, 0.0)] += 1
    # Four candidates, nearly always from 0-9 by size; the two highest losses of the four
    # train. 0 and 1, the fleet's two lowest losses, can never be among the top two of four.
    assert counts[0] == counts[1] == 0
    assert counts[9] > 1.5 * counts[4]  # ~0.4 x 300 vs ~0.16 x 300
    assert counts[10:].sum() < 0.05 * counts.sum()  # the big devices crowd the draw


def test_d_sets_the_candidate_count() -> None:
    assert PowerOfChoice(3, d=10).candidates(3) == 10
    assert PowerOfChoice(3, d=10).candidates(12) == 12  # never fewer than asked
    assert PowerOfChoice(3, candidate_factor=2.0).candidates(3) == 6
    ledger = blank(20)
    trained(ledger, np.arange(20), 1, loss=np.arange(20.0))
    chosen = PowerOfChoice(3, seed=0, d=20).select(ledger, 2, 0.0)  # every device a candidate
    assert sorted(chosen.tolist()) == [17, 18, 19]


def test_pow_d_compares_losses_relative_to_their_rounds_mean() -> None:
    """A loss reported long ago, when every loss was high, does not outrank a fresh one."""
    ledger = blank(8)
    trained(ledger, [0, 1, 2, 3], 1, loss=np.array([10.0, 10.0, 10.0, 12.0]))  # mean 10.5
    trained(ledger, [4, 5, 6, 7], 5, loss=np.array([1.0, 1.0, 1.0, 2.0]))  # mean 1.25
    pow_d = PowerOfChoice(1, seed=0, d=8, variant="pow-d")
    assert pow_d.select(ledger, 6, 0.0).tolist() == [7]  # 2 / 1.25 > 12 / 10.5
    rpow_d = PowerOfChoice(1, seed=0, d=8, variant="rpow-d")
    assert rpow_d.select(ledger, 6, 0.0).tolist() == [3]  # raw: 12 > 2
    saved = pow_d.state_dict()
    assert saved["round_loss"] == [[1, 10.5], [5, 1.25]]
    again = PowerOfChoice(1, variant="pow-d")
    again.load_state_dict(saved)
    assert again.round_loss == pow_d.round_loss


def test_pow_d_keeps_a_rounds_mean_once_recorded() -> None:
    ledger = blank(6)
    trained(ledger, [0, 1, 2], 1, loss=np.array([1.0, 2.0, 3.0]))
    strategy = PowerOfChoice(1, seed=0, d=6, variant="pow-d")
    strategy.select(ledger, 2, 0.0)
    trained(ledger, [0, 1], 2, loss=0.5)  # device 2 is now round 1's only member
    strategy.select(ledger, 3, 0.0)
    assert strategy.round_loss == {1: 2.0, 2: 0.5}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": "cpow-d"}, "strategy.variant=cpow-d is not offered"),
        ({"variant": "powd"}, "strategy.variant must be one of rpow-d, pow-d"),
        ({"d": 1}, "strategy.d must be an integer in \\[3, "),
        ({"d": 4.5}, "strategy.d must be an integer"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(FedbenchError, match=message):
        PowerOfChoice(3, **kwargs)  # type: ignore[arg-type]
