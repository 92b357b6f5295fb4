"""FjORD on the device: a width drawn per batch, self-distillation from the p_max teacher."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.algorithms.base import client_halves
from fedbench.algorithms.fjord import OrderedDropout
from fedbench.core.plans import Plan
from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.models import model_config
from fedbench.models.width import build_at
from fedbench.train.loop import TrainParams, train_local

RATES = [1.0, 0.5, 0.25]


def _draws(half: OrderedDropout, seed: int, steps: int = 60) -> list[float]:
    out = []
    for step in range(steps):
        half.before_step(step, seed)
        out.append(half.p)
    return out


def test_widths_are_drawn_per_step_seeded_and_cover_the_allowed_rates() -> None:
    half = OrderedDropout(RATES)
    drawn = _draws(half, seed=7)
    assert set(drawn) == set(RATES)  # every width up to p_max, over a round's steps
    assert drawn == _draws(OrderedDropout(RATES), seed=7)  # seeded by the round's seed
    assert drawn != _draws(OrderedDropout(RATES), seed=8)
    assert set(_draws(OrderedDropout([0.5, 0.25]), seed=7)) == {0.5, 0.25}  # never above p_max
    with pytest.raises(FedbenchError, match="od-rates"):
        OrderedDropout([0.5, 1.0])  # a width above the device's p_max


def _train(
    kd: list[float] | None, plan: Plan, model_name: str = "lenet"
) -> dict[str, torch.Tensor]:
    cfg = model_config(model_name)
    torch.manual_seed(0)
    config: dict[str, object] = {"model-rate": 1.0, "od-rates": RATES}
    if kd is not None:
        config["od-kd"] = kd
    halves = client_halves(config)
    model: nn.Module = build_at(cfg, 1.0)
    start = model.state_dict()
    for half in halves:  # `model-rate` hands out its cached module: the handler loads into it
        model = half.local_model(model, cfg)
    model.load_state_dict(start)
    generator = torch.Generator().manual_seed(1)
    data = Tensors(torch.randn(32, 1, 28, 28, generator=generator), torch.arange(32) % 10)
    params = TrainParams(
        batch_size=16, local_epochs=1, lr=0.1, momentum=0.0, weight_decay=0.0, halves=halves
    )
    train_local(model, data, params, seed=3, plan=plan)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_distillation_changes_the_update_and_is_exact_under_micro_batches() -> None:
    whole = _train([1.0, 1.0], Plan(1))
    split = _train([1.0, 1.0], Plan(2))  # two micro-batches of 8: one width for the step
    for key, value in whole.items():
        torch.testing.assert_close(split[key], value, rtol=1e-5, atol=1e-6)
    plain = _train(None, Plan(1))
    assert any(not torch.allclose(plain[k], whole[k]) for k in whole)  # the KD term counts
    mixed = _train([0.5, 2.0], Plan(1))  # alpha and T are the paper's knobs
    assert any(not torch.allclose(mixed[k], whole[k]) for k in whole)


def test_the_student_trains_only_its_prefix_of_the_p_max_model() -> None:
    cfg = model_config("lenet")
    half = OrderedDropout([1.0, 0.25])
    model = half.local_model(build_at(cfg, 1.0), cfg)
    half.p = 0.25
    objective = half.objective(model)
    assert objective is not None
    x, y = torch.randn(4, 1, 28, 28), torch.arange(4)
    objective(model, x, y).backward()
    grad = dict(model.named_parameters())["features.0.weight"].grad
    assert grad is not None
    assert grad[2:].abs().sum() == 0 and grad[:2].abs().sum() > 0  # ceil(0.25 * 6) = 2 channels


def test_a_batchnorm_prefix_updates_the_p_max_models_running_statistics() -> None:
    cfg = model_config("small_cnn")
    half = OrderedDropout([1.0, 0.5])
    model = half.local_model(build_at(cfg, 1.0).train(), cfg)
    before = model.state_dict()["features.1.running_mean"].clone()
    half.p = 0.5
    objective = half.objective(model)
    assert objective is not None
    objective(model, torch.randn(8, 3, 32, 32), torch.arange(8)).backward()
    after = model.state_dict()["features.1.running_mean"]
    half_width = len(before) // 2
    assert not torch.equal(after[:half_width], before[:half_width])
    assert torch.equal(after[half_width:], before[half_width:])
    # With the p_max teacher in the same step, its backward runs after the student's
    # statistics were written back (as new tensors: the teacher saved the old ones).
    taught = OrderedDropout([1.0, 0.5], kd=[1.0, 1.0])
    taught.local_model(model, cfg)
    taught.p = 0.5
    loss = taught.objective(model)
    assert loss is not None
    loss(model, torch.randn(8, 3, 32, 32), torch.arange(8)).backward()
