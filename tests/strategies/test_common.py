from __future__ import annotations

import numpy as np
import pytest

from fedbench.errors import FedbenchError
from strategies.common import (
    check_number,
    comm_time_s,
    round_time_s,
    staleness_bonus,
    top_k,
    weighted_sample,
)
from tests.strategies.ledgers import blank


def test_signals_prefer_measurement_over_prediction() -> None:
    ledger = blank(3)
    ledger.pred_latency_s[:] = [10.0, 10.0, np.nan]
    ledger.pred_comm_s[:] = [2.0, np.nan, np.nan]
    ledger.latency_s[0], ledger.round_trip_s[0] = 30.0, 35.0
    idx = np.arange(3)
    t = round_time_s(ledger, idx)
    assert t[0] == 35.0 and t[1] == 10.0 and np.isnan(t[2])
    assert comm_time_s(ledger, idx).tolist() == [5.0, 0.0, 0.0]


def test_staleness_grows_for_devices_left_out() -> None:
    ledger = blank(3)
    ledger.last_round[:] = [1, 5, 10]
    bonus = staleness_bonus(ledger, np.arange(3), 10)
    assert bonus[0] > bonus[1] > bonus[2] > 0
    assert np.isclose(bonus[0], np.sqrt(0.1 * np.log(10)))


def test_top_k_largest_first_nan_last_random_ties() -> None:
    v = np.array([1.0, np.nan, 5.0, 3.0])
    assert top_k(v, 3).tolist() == [2, 3, 0]
    assert top_k(v, 10).tolist()[:3] == [2, 3, 0]
    ties = np.zeros(100)
    firsts = {int(top_k(ties, 1, np.random.default_rng(s))[0]) for s in range(20)}
    assert len(firsts) > 10  # not always device 0


def test_weighted_sample_is_proportional_and_distinct() -> None:
    rng = np.random.default_rng(0)
    w = np.array([1.0, 2.0, 7.0, 0.0])
    counts = np.zeros(4)
    for _ in range(4000):
        pick = weighted_sample(rng, w, 1)
        counts[pick] += 1
    assert counts[3] == 0
    assert np.allclose(counts[:3] / 4000, [0.1, 0.2, 0.7], atol=0.03)
    both = weighted_sample(rng, w, 4)
    assert sorted(both.tolist()) == [0, 1, 2, 3] and both[-1] == 3  # zero weight drawn last


def test_check_number_names_the_key() -> None:
    assert check_number("alpha", 2, 0, 10) == 2.0
    with pytest.raises(
        FedbenchError, match=r"strategy.alpha must be a number in \[0, 10\], got -1"
    ):
        check_number("alpha", -1, 0, 10)
    with pytest.raises(FedbenchError, match="strategy.n must be an integer"):
        check_number("n", 2.5, 0, 10, integer=True)
