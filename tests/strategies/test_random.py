from __future__ import annotations

import numpy as np
import pytest

from fedbench.errors import FedbenchError
from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import Ledger
from strategies.random import RandomSelection


def _ledger(n: int) -> Ledger:
    return Ledger(expand_fleet({"devices": [{"profile": "host", "count": n}]}))


def test_picks_k_distinct_available_devices() -> None:
    ledger = _ledger(10)
    ledger.available[[0, 3, 4]] = False
    picked = RandomSelection(4, seed=1).select(ledger, 1, 0.0)
    assert len(picked) == 4 and len(set(picked.tolist())) == 4
    assert not set(picked.tolist()) & {0, 3, 4}


def test_seeded_and_uniform() -> None:
    a = RandomSelection(3, seed=7).select(_ledger(10), 1, 0.0)
    b = RandomSelection(3, seed=7).select(_ledger(10), 1, 0.0)
    assert np.array_equal(a, b)
    strategy, ledger = RandomSelection(2, seed=0), _ledger(5)
    counts = np.zeros(5)
    for r in range(2000):
        counts[strategy.select(ledger, r, 0.0)] += 1
    assert counts.min() > 0.85 * counts.mean()  # every device ~ 2/5 of rounds


def test_fewer_available_than_asked() -> None:
    ledger = _ledger(3)
    ledger.available[:] = [True, False, False]
    assert RandomSelection(2).select(ledger, 1, 0.0).tolist() == [0]


def test_state_dict_resumes_identically() -> None:
    s = RandomSelection(2, seed=3)
    s.select(_ledger(8), 1, 0.0)
    saved = s.state_dict()
    first = s.select(_ledger(8), 2, 0.0)
    s.load_state_dict(saved)
    assert np.array_equal(first, s.select(_ledger(8), 2, 0.0))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_clients_per_round(bad: object) -> None:
    with pytest.raises(FedbenchError, match="clients_per_round must be a positive integer"):
        RandomSelection(bad)  # type: ignore[arg-type]


def test_larger_than_fleet() -> None:
    with pytest.raises(FedbenchError, match="clients_per_round=5 is larger than the fleet"):
        RandomSelection(5).check_fleet(3)
