from __future__ import annotations

import numpy as np
import pytest

from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from strategies.oort import Oort
from tests.strategies.ledgers import blank, trained


def _counts(strategy: Oort, ledger: Ledger, rounds: int, server_round: int = 5) -> np.ndarray:
    counts = np.zeros(len(ledger))
    for _ in range(rounds):
        counts[strategy.select(ledger, server_round, 0.0)] += 1
    return counts


def test_prefers_high_utility_fast_devices() -> None:
    ledger = blank(100)
    trained(ledger, np.arange(100), 1, loss=0.1)
    ledger.train_loss[:20] = 3.0
    ledger.utility[:20] = 300.0  # 0-9 fast, 10-19 slow: same statistical utility
    ledger.round_trip_s[:] = 10.0
    ledger.round_trip_s[10:20] = 200.0
    strategy = Oort(10, seed=0, exploration=0.0, exploration_min=0.0, pacer_step=None)
    counts = _counts(strategy, ledger, 200)
    fast_useful, slow_useful, rest = counts[:10].mean(), counts[10:20].mean(), counts[20:].mean()
    assert fast_useful > 2.5 * rest
    assert slow_useful < 0.1 * fast_useful  # (10 / 200)^2 system penalty


def test_system_penalty_and_clipping() -> None:
    ledger = blank(100)
    trained(ledger, np.arange(100), 1, loss=np.linspace(0.5, 1.0, 100))
    ledger.utility[0] = 1e9  # a corrupt loss must not own every round
    ledger.round_trip_s[:] = 10.0
    ledger.round_trip_s[1] = 40.0
    strategy = Oort(5, alpha=2.0)
    s = strategy.exploit_scores(ledger, np.arange(100), 1, preferred=10.0)
    assert s[0] <= s.max() and s[0] < 1.2 * np.percentile(s, 98)
    twin = Oort(5, alpha=2.0).exploit_scores(ledger, np.arange(100), 1, preferred=np.inf)
    assert np.isclose(s[1], twin[1] * (10.0 / 40.0) ** 2)


def test_explores_never_seen_devices_by_predicted_speed_then_decays() -> None:
    ledger = blank(200)
    trained(ledger, np.arange(100), 1)
    ledger.round_trip_s[:100] = 10.0
    ledger.pred_latency_s[100:150] = 10.0  # never seen, predicted fast
    ledger.pred_latency_s[150:] = 1000.0  # never seen, predicted slow
    strategy = Oort(10, seed=1, pacer_step=None)
    first = strategy.select(ledger, 2, 0.0)
    new = first[first >= 100]
    assert len(new) >= 8  # exploration 0.9 * 0.98: 9 of 10 places
    assert np.all(new < 150)  # the fast ones
    for r in range(3, 120):
        strategy.select(ledger, r, 0.0)
    assert strategy.exploration == pytest.approx(0.3)
    late = strategy.select(ledger, 120, 0.0)
    assert (late >= 100).sum() == 3  # 10 - int(10 * 0.7)


def test_falls_back_to_exploitation_when_nothing_is_left_to_explore() -> None:
    ledger = blank(12)
    trained(ledger, np.arange(10), 1)
    chosen = Oort(6, seed=0).select(ledger, 2, 0.0)
    assert len(chosen) == 6 and {10, 11} <= set(chosen.tolist())


def test_pacer_relaxes_preferred_duration_when_utility_stalls() -> None:
    ledger = blank(20)
    ledger.round_trip_s[:] = np.arange(1.0, 21.0)
    strategy = Oort(4, seed=0, pacer_step=2, pacer_delta=5.0, round_threshold=30.0)
    for r in range(1, 6):
        strategy.select(ledger, r, 0.0)
        trained(ledger, np.arange(4), r, loss=1.0)  # same utility every round
    assert strategy.round_threshold == 30.0  # only 3 rounds of history yet
    strategy.select(ledger, 6, 0.0)  # rounds 2-3 vs 4-5: flat
    assert strategy.round_threshold == 35.0
    assert strategy._preferred_duration(ledger) == np.percentile(np.arange(1.0, 21.0), 35.0)


def test_pacer_tightens_when_utility_jumps() -> None:
    ledger = blank(20)
    strategy = Oort(4, seed=0, pacer_step=1, pacer_delta=5.0, round_threshold=30.0)
    trained(ledger, np.arange(4), 1, loss=1.0)
    strategy.select(ledger, 2, 0.0)
    trained(ledger, np.arange(4), 2, loss=10.0)  # 10x the utility of round 1
    strategy.select(ledger, 3, 0.0)
    assert strategy.round_threshold == 25.0


@pytest.mark.parametrize(
    ("key", "value"),
    [("exploration", 1.5), ("exploration_min", 0.95), ("alpha", -1), ("pacer_step", 0)],
)
def test_bad_parameters(key: str, value: object) -> None:
    with pytest.raises(FedbenchError, match=f"strategy.{key} must be"):
        Oort(2, **{key: value})  # type: ignore[arg-type]
