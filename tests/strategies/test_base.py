from __future__ import annotations

import numpy as np
import pytest

from fedbench.errors import FedbenchError
from strategies.random import RandomSelection
from tests.strategies.ledgers import blank


@pytest.mark.parametrize(
    ("k", "overcommit", "wanted"),
    [(10, 0.0, 10), (10, 0.1, 11), (10, 0.3, 13), (3, 0.3, 4), (1, 1, 2)],
)
def test_overcommit_asks_for_ceil_more(k: int, overcommit: float, wanted: int) -> None:
    strategy = RandomSelection(k, overcommit=overcommit)
    assert strategy.wanted() == wanted
    assert len(strategy.select(blank(50), 1, 0.0)) == wanted


def test_overcommit_capped_by_eligible_devices() -> None:
    assert len(RandomSelection(4, overcommit=1.0).select(blank(6), 1, 0.0)) == 6


@pytest.mark.parametrize("bad", [-0.1, 11, True, "0.3", None])
def test_bad_overcommit(bad: object) -> None:
    with pytest.raises(FedbenchError, match="strategy.overcommit must be a number in"):
        RandomSelection(2, overcommit=bad)  # type: ignore[arg-type]


def test_eligible_excludes_unavailable_and_predicted_oom_only() -> None:
    ledger = blank(6)
    ledger.available[0] = False
    ledger.pred_peak_mem_mb[:] = [100, 900, 900, 100, np.nan, 900]
    ledger.mem_budget_mb[:] = [500, 500, np.nan, 500, 500, 1000]
    # 1: predicted over budget; 2: budget unknown (kept); 4: no prediction (kept).
    assert RandomSelection(1).eligible(ledger, 0.0).tolist() == [2, 3, 4, 5]
