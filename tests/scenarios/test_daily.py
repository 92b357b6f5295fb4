"""The daily scenario's day and sample bookkeeping."""

from __future__ import annotations

import pytest
import torch

from fedbench.errors import FedbenchError
from fedbench.scenarios.context import data_context
from fedbench.scenarios.daily import DAY_S, DailyScenario
from fedbench.scenarios.rounds import FederatedRounds
from tests.bad_inputs import _typed

# Digits at 16x16, seed 3: the data every test below partitions.
EXPERIMENT = _typed(["seed=3", "model.input_shape=[3,16,16]"])


def test_schedule_days_rounds_and_start_times() -> None:
    s = DailyScenario(days=3, new_samples_per_day=8, rounds_per_day=2, start_hour=2.0)
    plan = list(s.schedule())
    assert [(r.round, r.day) for r in plan] == [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3)]
    assert [r.evaluate for r in plan] == [False, True] * 3
    assert plan[0].earliest_start_s == 2 * 3600.0
    assert plan[2].earliest_start_s == DAY_S + 2 * 3600.0
    assert plan[1].earliest_start_s == 0.0  # second round of a day follows the first


def test_each_device_gets_new_samples_every_day() -> None:
    ctx = data_context(EXPERIMENT, num_devices=4)
    s = DailyScenario(days=17, new_samples_per_day=24)
    days = [s.device_data(ctx, 1, d) for d in (1, 2, 17)]
    assert [len(d) for d in days] == [24, 24, 24]
    assert not torch.equal(days[0].x, days[1].x)
    # the same day is the same data, whoever asks and in whatever order
    assert torch.equal(s.device_data(ctx, 1, 2).x, days[1].x)
    assert not torch.equal(s.device_data(ctx, 2, 2).x, days[1].x)


def test_replay_adds_earlier_days_bounded() -> None:
    ctx = data_context(EXPERIMENT, num_devices=4)
    s = DailyScenario(days=10, new_samples_per_day=16, replay_days=2)
    assert len(s.device_data(ctx, 0, 1)) == 16  # nothing to replay on day 1
    assert len(s.device_data(ctx, 0, 2)) == 32
    assert len(s.device_data(ctx, 0, 5)) == 48  # today + 2 earlier days, not 4


def test_device_pool_is_disjoint_from_test_and_server() -> None:
    ctx = data_context(EXPERIMENT, num_devices=4)
    idx = ctx.splits.indices
    assert idx is not None and idx.test is not None
    sets = [set(idx.server.tolist()), set(idx.pool.tolist()), set(idx.test.tolist())]
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    covered = set().union(*(set(p.tolist()) for p in ctx.partitions))
    assert covered == set(range(len(ctx.splits.pool)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"days": 0, "new_samples_per_day": 8}, "scenario.days must be a positive integer"),
        ({"days": 2, "new_samples_per_day": -1}, "new_samples_per_day must be a positive"),
        ({"days": 2, "new_samples_per_day": 8, "replay_days": -1}, "replay_days must be"),
        ({"days": 2, "new_samples_per_day": 8, "start_hour": 25}, "start_hour must be in"),
        ({"days": 2, "new_samples_per_day": 8, "pretrain": {"epoch": 3}}, "unknown key"),
    ],
)
def test_bad_scenarios(kwargs: dict, match: str) -> None:
    with pytest.raises(FedbenchError, match=match):
        DailyScenario(**kwargs)


def test_plain_rounds_train_on_the_whole_partition() -> None:
    ctx = data_context(EXPERIMENT, num_devices=4)
    s = FederatedRounds(rounds=5, eval_every=2)
    assert [r.evaluate for r in s.schedule()] == [False, True, False, True, True]
    assert len(s.device_data(ctx, 3, 4)) == len(ctx.partitions[3])
