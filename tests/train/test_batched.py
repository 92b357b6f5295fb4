"""Several devices trained in one vmapped pass give what one device after another gives."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fedbench.algorithms.fedprox import Proximal
from fedbench.data.source import Tensors
from fedbench.models.small_cnn import SmallCNN
from fedbench.train.batched import batchable, train_batched
from fedbench.train.loop import TrainParams, train_local
from fedbench.train.optimizers import LocalOptimizer


def _devices(n: int, size: int) -> list[Tensors]:
    g = torch.Generator().manual_seed(1)
    return [
        Tensors(
            torch.randn(size, 3, 16, 16, generator=g), torch.randint(0, 10, (size,), generator=g)
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    "params",
    [
        TrainParams(8, 2, 0.05, 0.9, 5e-4),  # SGD with momentum and weight decay, 2 epochs
        TrainParams(16, 1, 0.1, 0.0, 0.0, halves=(Proximal(0.5),)),  # plain SGD, FedProx's pull
    ],
)
def test_batched_training_equals_sequential_training(params: TrainParams) -> None:
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8)
    datas = _devices(4, 20)  # 20 examples: the last step of each epoch is short
    seeds = [11, 12, 13, 14]
    together = train_batched(model, datas, params, seeds)
    for data, seed, (state, loss) in zip(datas, seeds, together, strict=True):
        alone = copy.deepcopy(model)
        expected = train_local(alone, data, params, seed)
        assert abs(loss - expected) < 1e-5
        for key, value in alone.state_dict().items():
            assert torch.allclose(state[key].to(value.dtype), value, atol=1e-5), key
    # The model itself still holds the weights it was given.
    torch.manual_seed(0)
    fresh = SmallCNN(3, 10, 8)
    assert all(
        torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters(), strict=True)
    )


def test_only_plain_sgd_loops_over_equal_data_are_batched() -> None:
    model = SmallCNN(3, 10, 8)
    datas = _devices(3, 20)
    sgd = TrainParams(8, 1, 0.05, 0.9, 0.0)
    assert batchable(model, datas, sgd)
    assert not batchable(model, datas[:1], sgd)  # one device: nothing to batch
    assert not batchable(model, [*datas[:2], _devices(1, 12)[0]], sgd)  # unequal data
    adam = TrainParams(8, 1, 0.05, 0.9, 0.0, optimizer=LocalOptimizer("torch.optim.Adam"))
    assert not batchable(model, datas, adam)
    dropout = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(3 * 16 * 16, 10))
    assert not batchable(dropout, datas, sgd)


def test_a_vmapped_step_holds_at_most_max_vmap_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    import fedbench.train.batched as batched

    steps: list[int] = []

    def counting(fn):  # type: ignore[no-untyped-def]
        mapped = torch.func.vmap(fn)

        def step(w, b, x, y):  # type: ignore[no-untyped-def]
            steps.append(x.shape[0] * x.shape[1])  # devices x examples in this step
            return mapped(w, b, x, y)

        return step

    monkeypatch.setattr(batched, "vmap", counting)
    monkeypatch.setattr(batched, "MAX_VMAP_EXAMPLES", 24)  # 3 devices at batch 8
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8)
    params = TrainParams(8, 1, 0.05, 0.9, 5e-4)
    datas, seeds = _devices(7, 16), list(range(7))
    blocks = train_batched(model, datas, params, seeds)
    assert steps and max(steps) <= 24  # blocks of 3, 3 and 1 devices, 2 steps each
    assert len(steps) == 6
    monkeypatch.setattr(batched, "MAX_VMAP_EXAMPLES", 10_000)  # all 7 in one block
    whole = train_batched(model, datas, params, seeds)
    for (a, loss_a), (b, loss_b) in zip(blocks, whole, strict=True):
        assert abs(loss_a - loss_b) < 1e-5
        assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
