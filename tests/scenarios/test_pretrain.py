"""Server pretraining is cached by everything that determines the weights."""

from __future__ import annotations

import torch
from torch import nn

from fedbench.scenarios.context import data_context
from fedbench.scenarios.pretrain import PretrainParams, pretrained_state
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
