"""FedBuff on the virtual clock, with fabricated devices of two speeds."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from flwr.serverapp.strategy import (
    FedAdam,
    FedAvg,
    FedAvgM,
    FedMedian,
    FedProx,
    FedTrimmedAvg,
    Krum,
)

from fedbench.server.close import Deadline
from fedbench.server.fedbuff import FedBuff, weighs_by_examples
from fedbench.server.run import LoopState
from tests.server.fakes import Recorder, build_loop, device, spec, weights


def _run(mode: FedBuff, aggregations: int) -> tuple[LoopState, Recorder]:
    hook = Recorder()
    devices = {"fast": device(1.0, 1.0), "slow": device(3.0, 10.0)}
    loop, _, _ = build_loop(devices, k=2, hooks=[hook], mode=mode)
    state = loop.run([spec(r) for r in range(1, aggregations + 1)], LoopState(0, 0.0, 0, weights()))
    return state, hook


def test_the_fast_device_contributes_more_and_the_slow_one_arrives_stale() -> None:
    state, hook = _run(FedBuff(buffer_size=2, concurrency=2), aggregations=4)
    rows = [r for outcome in hook.outcomes for r in outcome.reports]  # type: ignore[attr-defined]
    fast = [r for r in rows if r.device == "fast"]
    slow = [r for r in rows if r.device == "slow"]
    assert len(fast) > 2 * len(slow) >= 2
    # Events on the virtual clock: fast arrives at 1, 2, 3, ...; slow at 3 and 6.
    assert [r.end_s for r in slow] == [3.0, 6.0]
    assert [r.end_s for r in fast][:3] == [1.0, 2.0, 3.0]
    # The slow device started on version 0 and arrived after one aggregation: staleness 1.
    assert slow[0].model_version == 0 and slow[0].staleness == 1
    assert all(r.staleness == 0 for r in fast[:3])
    assert state.model_version == 4 and state.round == 4


def test_staleness_weights_the_stale_update_down() -> None:
    hook = _run(FedBuff(buffer_size=2, concurrency=2), aggregations=2)[1]
    second = hook.outcomes[1]  # the slow update (stale by 1, +10) with a fresh fast one (+1)
    assert sorted(r.device for r in second.reports) == ["fast", "slow"]  # type: ignore[attr-defined]
    w = 1 / math.sqrt(2)  # polynomial weight 1/(1+s)^0.5 at staleness 1
    expected = 1.0 + (w * 10.0 + 1.0) / (w + 1.0)  # version 1 is +1; rebased deltas averaged
    state, _ = _run(FedBuff(buffer_size=2, concurrency=2), aggregations=2)
    assert np.allclose(state.arrays["w"].numpy(), expected)
    constant, _ = _run(FedBuff(buffer_size=2, concurrency=2, staleness="constant"), 2)
    assert np.allclose(constant.arrays["w"].numpy(), 1.0 + 11.0 / 2)


def test_updates_too_stale_are_dropped_and_counted() -> None:
    mode = FedBuff(buffer_size=1, concurrency=2, max_staleness=1)
    hook = Recorder()
    devices = {"fast": device(1.0, 1.0), "slow": device(3.0, 10.0)}
    loop, _, _ = build_loop(devices, k=2, hooks=[hook], mode=mode)
    loop.run([spec(r) for r in range(1, 6)], LoopState(0, 0.0, 0, weights()))
    rows = [r for outcome in hook.outcomes for r in outcome.reports]  # type: ignore[attr-defined]
    stale = [r for r in rows if r.device == "slow"]
    assert stale and stale[0].status == "timeout" and stale[0].reason.startswith("stale:")
    summary = loop.summary()["async"]  # type: ignore[index]
    assert summary["updates_discarded_stale"] >= 1 and summary["updates_applied"] == 5


def _records(hook: Recorder) -> list[tuple[str, float, float, int]]:
    return [(r.device, r.start_s, r.end_s, r.staleness) for o in hook.outcomes for r in o.reports]  # type: ignore[attr-defined]


def test_the_same_seed_gives_the_same_records() -> None:
    first = _run(FedBuff(buffer_size=2, concurrency=2), 5)[1]
    second = _run(FedBuff(buffer_size=2, concurrency=2), 5)[1]
    assert _records(first) == _records(second)


def test_a_round_close_fedbuff_cannot_apply_is_said_not_ignored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    devices = {"fast": device(1.0, 1.0), "slow": device(3.0, 10.0)}
    mode = FedBuff(buffer_size=2, concurrency=2)
    loop, _, _ = build_loop(devices, k=2, mode=mode, close=Deadline(deadline_s=2.0))
    assert "round_close (Deadline) does not apply" in capsys.readouterr().err
    assert loop.summary()["async"]["round_close_ignored"] == "Deadline"  # type: ignore[index]
    plain, _, _ = build_loop(devices, k=2, mode=mode)
    assert "does not apply" not in capsys.readouterr().err
    assert plain.summary()["async"]["round_close_ignored"] is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("cls", "weighted"),
    [
        (FedAvg, True),
        (FedProx, True),
        (FedAvgM, True),
        (FedAdam, True),
        (FedMedian, False),
        (FedTrimmedAvg, False),
        (Krum, False),
    ],
)
def test_fedbuff_asks_the_strategy_whether_it_weighs_by_examples(
    cls: type[FedAvg], weighted: bool
) -> None:
    before = random.getstate()
    assert weighs_by_examples(cls()) is weighted
    assert random.getstate() == before  # Flower's sampling stream is left as it was


def test_under_a_median_the_staleness_weight_scales_the_update_itself() -> None:
    median = FedMedian(fraction_evaluate=0.0, min_available_nodes=1, min_train_nodes=1)
    devices = {"fast": device(1.0, 1.0), "slow": device(3.0, 10.0)}
    mode = FedBuff(buffer_size=2, concurrency=2)
    loop, _, _ = build_loop(devices, k=2, mode=mode, algorithm=median)
    state = loop.run([spec(1), spec(2)], LoopState(0, 0.0, 0, weights()))
    # Version 1 is +1; then the fast update (+1) and the slow one (+10, stale by 1, weight
    # 1/sqrt(2)) are rebased; the median of two is their mean, the stale delta scaled.
    w = 1 / math.sqrt(2)
    assert np.allclose(state.arrays["w"].numpy(), 1.0 + (1.0 + w * 10.0) / 2, atol=1e-6)
    assert loop.summary()["async"]["staleness_applied_to"] == "update"  # type: ignore[index]
