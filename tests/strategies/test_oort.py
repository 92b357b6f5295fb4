from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest
import yaml

from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from fedbench.paths import conf_dir
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


def test_blacklists_devices_trained_more_than_blacklist_rounds() -> None:
    ledger = blank(40)
    trained(ledger, np.arange(40), 1)
    ledger.participation[:5] = 4  # trained in 4 rounds: over the limit of 3
    ledger.participation[5:10] = 3  # at the limit: still allowed
    strategy = Oort(10, seed=0, blacklist_rounds=3, pacer_step=None)
    assert strategy.blacklist(ledger).tolist() == [0, 1, 2, 3, 4]
    counts = _counts(strategy, ledger, 50)
    assert counts[:5].sum() == 0 and counts[5:10].sum() > 0
    assert not set(range(5)) & set(strategy.eligible(ledger, 0.0).tolist())
    assert len(Oort(10, seed=0).blacklist(ledger)) == 0  # off by default, as FedScale's


def test_blacklist_is_capped_keeping_the_most_trained() -> None:
    ledger = blank(20)
    trained(ledger, np.arange(20), 1)
    ledger.participation[:] = np.arange(20)  # device 19 trained most
    strategy = Oort(2, blacklist_rounds=0, blacklist_max_len=0.25)
    assert strategy.blacklist(ledger).tolist() == [19, 18, 17, 16, 15]  # 25% of 20
    assert len(strategy.select(ledger, 2, 0.0)) == 2  # the rest still fill the round


def test_exploration_takes_floor_e_k_places_as_fedscale() -> None:
    ledger = blank(200)
    trained(ledger, np.arange(100), 1)
    ledger.round_trip_s[:] = 10.0
    strategy = Oort(10, seed=0, pacer_step=None)
    chosen = strategy.select(ledger, 2, 0.0)  # e = 0.9 x 0.98 = 0.882
    assert (chosen >= 100).sum() == 8  # int(8.82) explored, 2 exploited
    assert strategy.split(10, 1, 100) == (1, 9)  # one explored device: exploration fills


def test_pacer_reads_the_utility_of_exploited_devices_only() -> None:
    ledger = blank(40)
    trained(ledger, np.arange(20), 1, loss=1.0)
    strategy = Oort(10, seed=0, pacer_step=5, exploration=0.5, exploration_min=0.5)
    chosen = strategy.select(ledger, 2, 0.0)
    exploited = chosen[chosen < 20]
    explored = chosen[chosen >= 20]
    assert len(exploited) == 5 and len(explored) == 5
    trained(ledger, exploited, 2, loss=1.0)  # utility 100 each
    trained(ledger, explored, 2, loss=50.0)  # utility 5000 each: exploration's, not counted
    assert strategy.exploited_utility(ledger) == pytest.approx(100.0, rel=1e-4)
    strategy.select(ledger, 3, 0.0)
    assert strategy.util_history[-1] == pytest.approx(100.0, rel=1e-4)


def test_defaults_match_the_config_and_the_sources() -> None:
    cfg = yaml.safe_load((conf_dir() / "strategy" / "oort.yaml").read_text())
    params = Oort(2).params
    for f in fields(params):
        assert cfg[f.name] == getattr(params, f.name), f.name
    assert params.clip_percentile == 95.0  # the paper's example, its artifact's clip_bound
    assert (params.exploration, params.exploration_decay, params.exploration_min) == (
        0.9,
        0.98,
        0.3,
    )
