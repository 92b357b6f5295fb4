"""Server pretraining is cached by everything that determines the weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.errors import FedbenchError
from fedbench.scenarios.context import data_context
from fedbench.scenarios.pretrain import PretrainParams, pretrained_state, warmup_cosine
from tests.bad_inputs import _typed

EXP = _typed(["seed=3", "model.name=tiny", "model.input_shape=[3,16,16]"])


def _net(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 16 * 16, width), nn.ReLU(), nn.Linear(width, 10)
    )


def test_second_call_hits_the_cache_and_trains_once() -> None:
    ctx = data_context(EXP, num_devices=2)
    params = PretrainParams(epochs=1, batch_size=64)
    first, cached1 = pretrained_state(EXP, params, ctx, lambda: _net(8))
    second, cached2 = pretrained_state(EXP, params, ctx, lambda: _net(8))
    assert (cached1, cached2) == (False, True)
    assert all(torch.equal(first[k], second[k]) for k in first)
    torch.manual_seed(EXP.seed)  # type: ignore[attr-defined]
    assert not torch.equal(first["1.weight"], _net(8).state_dict()["1.weight"])  # it trained


def test_a_changed_model_structure_misses_the_cache() -> None:
    ctx = data_context(EXP, num_devices=2)
    params = PretrainParams(epochs=1, batch_size=64)
    pretrained_state(EXP, params, ctx, lambda: _net(8))
    state, cached = pretrained_state(EXP, params, ctx, lambda: _net(12))
    assert not cached and state["1.weight"].shape == (12, 768)
    other = _typed(["seed=99", "model.name=tiny", "model.input_shape=[3,16,16]"])
    _, cached = pretrained_state(other, params, ctx, lambda: _net(8))  # type: ignore[arg-type]
    assert not cached


def test_the_thread_count_is_part_of_the_cache_key() -> None:
    # Another thread count sums in another order: its weights are its own (issue 31).
    ctx = data_context(EXP, num_devices=2)
    params = PretrainParams(epochs=1, batch_size=64, lr=0.01)
    _, cached = pretrained_state(EXP, params, ctx, lambda: _net(6), threads=1)
    assert not cached
    _, cached = pretrained_state(EXP, params, ctx, lambda: _net(6), threads=2)
    assert not cached
    _, cached = pretrained_state(EXP, params, ctx, lambda: _net(6), threads=1)
    assert cached


def test_the_schedule_warms_up_then_decays_to_zero() -> None:
    scale = warmup_cosine(total=100, warmup=10)
    assert scale(0) == 0.1 and scale(9) == 1.0  # linear warm-up to the full rate
    assert scale(10) == 1.0 and 0.49 < scale(55) < 0.51
    assert scale(99) < 1e-3  # the last step runs at almost nothing: the weights settle
    steps = PretrainParams(epochs=2, batch_size=10).lr_scale(95)
    assert steps is not None and steps(19) < 0.01  # 2 epochs x 10 steps, warm-up 2
    assert PretrainParams(schedule="constant").lr_scale(95) is None


@pytest.mark.parametrize(
    ("key", "value"), [("schedule", "linear"), ("warmup_fraction", 1.0), ("warmup_fraction", "x")]
)
def test_a_bad_schedule_is_refused_by_name(key: str, value: object) -> None:
    with pytest.raises(FedbenchError, match=f"scenario.pretrain.{key}="):
        PretrainParams.from_config({key: value})
