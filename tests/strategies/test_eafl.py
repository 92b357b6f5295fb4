from __future__ import annotations

from dataclasses import fields

import numpy as np
import yaml

from fedbench.ledger import Ledger
from fedbench.paths import conf_dir
from strategies.eafl import EAFL
from strategies.oort import Oort
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


def test_reward_is_the_documented_blend() -> None:
    ledger = _fleet()
    ledger.utility[:] = np.linspace(50.0, 150.0, 60)
    idx = np.array([0, 20, 55])
    strategy = EAFL(2, utility_weight=0.25, clip_percentile=90.0)
    clip = np.percentile(ledger.utility, 90.0)
    u = np.minimum(ledger.utility[idx] / clip, 1.0)
    expected = 0.25 * u + 0.75 * np.array([0.95, 0.30, 1.0])
    assert np.allclose(strategy.statistical_utility(ledger, idx), expected)
    ledger.utility[20] = np.nan  # no utility yet: no reward, whatever the battery
    assert np.isnan(strategy.statistical_utility(ledger, idx)[1])


def test_a_full_battery_does_not_rescue_a_device_too_slow_for_the_round() -> None:
    """The blend is Oort's utility, so the system penalty multiplies the battery term too."""
    ledger = blank(40)
    trained(ledger, np.arange(40), 1, loss=1.0)
    ledger.round_trip_s[:20] = 10.0
    ledger.battery_pct[:20] = 50.0  # fast, half charged
    ledger.round_trip_s[20:] = 100.0
    ledger.battery_pct[20:] = 100.0  # slow, full: (10 / 100)^2 penalty
    strategy = EAFL(2, utility_weight=0.5, round_threshold=30.0)
    scores = strategy.exploit_scores(ledger, np.arange(40), 5, preferred=10.0)
    assert scores[20:].max() < 0.1 * scores[:20].min()


def test_defaults_are_oorts_plus_the_authors_weight_and_no_floor() -> None:
    params = EAFL(2).params
    oort = Oort(2).params
    for f in fields(oort):
        assert getattr(params, f.name) == getattr(oort, f.name), f.name
    cfg = yaml.safe_load((conf_dir() / "strategy" / "eafl.yaml").read_text())
    for f in fields(params):
        assert cfg[f.name] == getattr(params, f.name), f.name
    assert params.utility_weight == 0.75  # the authors' scal_val
    assert params.battery_floor_pct == 0.0
    ledger = _fleet()
    assert set(EAFL(2).eligible(ledger, 0.0).tolist()) == set(range(60))  # 10% batteries too
