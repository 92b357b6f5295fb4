"""Properties every strategy must have, checked on the same fabricated fleets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from fedbench.paths import conf_dir
from strategies.base import SelectionStrategy
from strategies.eafl import EAFL
from strategies.fedcs import FedCS
from strategies.heteroaware import HeteroAware
from strategies.oort import Oort
from strategies.power_of_choice import PowerOfChoice
from strategies.random import RandomSelection
from strategies.tifl import TiFL
from tests.strategies.ledgers import blank, mixed, trained

MAKERS: dict[str, Callable[[int], SelectionStrategy]] = {
    "random": lambda seed: RandomSelection(8, seed=seed),
    "oort": lambda seed: Oort(8, seed=seed, pacer_step=2),
    "eafl": lambda seed: EAFL(8, seed=seed, pacer_step=2),
    "tifl": lambda seed: TiFL(8, seed=seed, num_tiers=3, interval=2),
    "fedcs": lambda seed: FedCS(
        8, deadline_s=80.0, seed=seed, max_clients=12, request_fraction=0.5
    ),
    "power_of_choice": lambda seed: PowerOfChoice(8, seed=seed),
    "heteroaware": lambda seed: HeteroAware(8, seed=seed, deadline_s=90.0),
}


def _rounds(strategy: SelectionStrategy, seed: int, rounds: int) -> list[list[int]]:
    """Run `rounds` rounds, feeding fabricated results back into the ledger."""
    ledger = mixed(seed=seed)
    rng = np.random.default_rng(seed + 100)
    picks = []
    for r in range(2, 2 + rounds):
        chosen = strategy.select(ledger, r, 600.0 * r)
        picks.append(chosen.tolist())
        trained(ledger, chosen, r, rng.uniform(0.1, 3.0, len(chosen)), 100.0)
        ledger.round_trip_s[chosen] = ledger.pred_latency_s[chosen] + ledger.pred_comm_s[chosen]
    return picks


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_distinct_eligible_sorted(name: str) -> None:
    strategy = MAKERS[name](0)
    ledger = mixed()
    never = set(np.flatnonzero(~ledger.available).tolist()) | {1, 3}  # 1, 3: predicted oom
    for r in range(2, 12):
        chosen = strategy.select(ledger, r, 600.0 * r)
        assert chosen.dtype == np.int64
        assert len(set(chosen.tolist())) == len(chosen) > 0
        assert np.all(np.diff(chosen) > 0)
        assert not never & set(chosen.tolist())
        if name != "fedcs":  # FedCS sizes its own rounds
            assert len(chosen) == 8
        trained(ledger, chosen, r, 1.0)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_seeded_determinism(name: str) -> None:
    assert _rounds(MAKERS[name](3), 3, 6) == _rounds(MAKERS[name](3), 3, 6)
    assert _rounds(MAKERS[name](3), 3, 6) != _rounds(MAKERS[name](4), 3, 6) or name == "fedcs"


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_state_dict_round_trip(name: str) -> None:
    a = MAKERS[name](5)
    ledger = mixed(seed=5)
    for r in range(2, 8):
        trained(ledger, a.select(ledger, r, 0.0), r, 0.5 + r / 10)
    saved = a.state_dict()
    b = MAKERS[name](99)  # a different seed: everything must come from the state
    b.load_state_dict(saved)
    for r in range(8, 14):
        first, second = a.select(ledger, r, 0.0), b.select(ledger, r, 0.0)
        assert np.array_equal(first, second)
        trained(ledger, first, r, 2.0 - r / 10)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_nothing_eligible(name: str) -> None:
    ledger = mixed()
    ledger.available[:] = False
    assert len(MAKERS[name](0).select(ledger, 2, 0.0)) == 0


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_fresh_host_fleet_without_any_figure(name: str) -> None:
    """Host devices: no predictions, no measurements yet - every strategy still picks."""
    chosen = MAKERS[name](0).select(blank(20), 1, 0.0)
    assert 0 < len(chosen) <= 12 and len(set(chosen.tolist())) == len(chosen)


@pytest.mark.parametrize(
    "path", sorted((conf_dir() / "strategy").glob("*.yaml")), ids=lambda p: p.stem
)
def test_yaml_builds_and_selects(path: Path) -> None:
    cfg = OmegaConf.load(path)
    cfg.seed = 0
    strategy = instantiate(cfg)
    assert isinstance(strategy, SelectionStrategy)
    assert len(strategy.select(mixed(), 2, 0.0)) > 0
    assert path.read_text().startswith(f"# python -m fedbench strategy={path.stem}\n")


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_predicted_infeasible_devices(name: str) -> None:
    """The server predicts inf time and energy where a profile cannot finish a round."""
    ledger = mixed()
    hopeless = np.flatnonzero(ledger.selected == 0)[:10]
    ledger.pred_latency_s[hopeless] = np.inf
    ledger.pred_energy_j[hopeless] = np.inf
    strategy = MAKERS[name](0)
    for r in range(2, 7):
        chosen = strategy.select(ledger, r, 0.0)
        assert len(chosen) > 0
        if name in ("fedcs", "heteroaware", "oort", "eafl"):  # deadline or (T / inf)^alpha = 0
            assert not set(hopeless.tolist()) & set(chosen.tolist()), name
    if name == "tifl":
        tiers = TiFL(8, num_tiers=3).tiers(ledger)
        assert np.all(tiers[hopeless] == 2)  # the slowest tier, not "unprofiled"
