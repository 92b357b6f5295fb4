"""Several devices trained in one vmapped pass give what one device after another gives."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Sequence

import pytest
import torch
from torch import nn

from fedbench.algorithms.base import ClientHalf
from fedbench.algorithms.fedprox import Proximal
from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.models.small_cnn import SmallCNN
from fedbench.train.batched import (
    HEADROOM,
    Step,
    Trained,
    batchable,
    batching_pays,
    chunk_for,
    refusal,
    stacked_optimizer,
    train_batched,
    train_cohort,
)
from fedbench.train.loop import TrainParams, train_local
from fedbench.train.optimizers import NAMED, LocalOptimizer


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


def test_only_loops_over_equal_data_with_a_stacked_optimizer_are_batched() -> None:
    model = SmallCNN(3, 10, 8)
    datas = _devices(3, 20)
    sgd = TrainParams(8, 1, 0.05, 0.9, 0.0)
    assert batchable(model, datas, sgd)
    assert not batchable(model, datas[:1], sgd)  # one device: nothing to batch
    assert not batchable(model, [*datas[:2], _devices(1, 12)[0]], sgd)  # unequal data
    for name in ("adam", "adamw"):
        assert batchable(model, datas, TrainParams(8, 1, 0.05, 0.9, 0.0, optimizer=_opt(name)))
    rmsprop = TrainParams(8, 1, 0.05, 0.9, 0.0, optimizer=LocalOptimizer("torch.optim.RMSprop"))
    assert not batchable(model, datas, rmsprop)
    assert "torch.optim.RMSprop has no stacked update" in str(refusal(rmsprop))
    with pytest.raises(
        FedbenchError,
        match="train.optimizer=torch.optim.RMSprop: .*batched: torch.optim.SGD, "
        "torch.optim.Adam, torch.optim.AdamW",
    ):
        stacked_optimizer(rmsprop, {})
    # Settings of its own are not the default update: refused, never ignored.
    nesterov = LocalOptimizer("torch.optim.SGD", {"nesterov": True})
    refused = TrainParams(8, 1, 0.05, 0.9, 0.0, optimizer=nesterov)
    assert not batchable(model, datas, refused)
    assert "settings of its own (nesterov)" in str(refusal(refused))
    # A client half whose correction is not elementwise keeps devices apart; one that
    # corrects nothing (FedProx at mu 0) does not.
    assert not batchable(model, datas, TrainParams(8, 1, 0.05, 0.9, 0.0, halves=(_Whole(1),)))
    assert "_Whole corrects gradients not elementwise" in str(
        refusal(TrainParams(8, 1, 0.05, 0.9, 0.0, halves=(_Whole(1),)))
    )
    assert batchable(model, datas, TrainParams(8, 1, 0.05, 0.9, 0.0, halves=(Proximal(0.0),)))
    dropout = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(3 * 16 * 16, 10))
    assert batchable(dropout, datas, sgd)  # per-device masks (vmap's randomness="different")


def _opt(name: str) -> LocalOptimizer:
    return LocalOptimizer(NAMED[name])


class _Whole(ClientHalf):
    """A correction over the whole tensor (a norm): vmapped devices would share it."""

    def corrects(self) -> bool:
        return True

    def correct(self, grad: torch.Tensor, weight: torch.Tensor, anchor: torch.Tensor) -> None:
        grad.div_(grad.norm() + 1)


@pytest.mark.parametrize(
    "params",
    [
        TrainParams(8, 2, 0.01, 0.0, 1e-3, optimizer=_opt("adam")),  # L2 in the gradient
        # decoupled weight decay, FedProx's pull first
        TrainParams(16, 1, 0.01, 0.0, 0.05, optimizer=_opt("adamw"), halves=(Proximal(0.3),)),
    ],
)
def test_adam_family_batched_equals_torch_optim(params: TrainParams) -> None:
    # No BatchNorm here: a bias right before one has a gradient of float noise, which
    # Adam's normalised step turns into +-lr either way.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 14 * 14, 10))
    datas, seeds = _devices(3, 20), [11, 12, 13]
    together = train_batched(model, datas, params, seeds)
    for data, seed, (state, loss) in zip(datas, seeds, together, strict=True):
        alone = copy.deepcopy(model)
        assert abs(loss - train_local(alone, data, params, seed)) < 1e-5
        for key, value in alone.state_dict().items():
            assert torch.allclose(state[key], value, atol=1e-5), key


def test_batchnorm_running_statistics_stay_per_device() -> None:
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8)  # three BatchNorm2d layers
    datas = _devices(3, 16)
    datas[1] = Tensors(datas[1].x * 5 + 2, datas[1].y)  # another distribution on device 1
    params, seeds = TrainParams(8, 1, 0.05, 0.9, 0.0), [1, 2, 3]
    together = train_batched(model, datas, params, seeds)
    means = [state["features.1.running_mean"] for state, _ in together]
    assert not torch.allclose(means[0], means[1], atol=1e-3)
    for data, seed, (state, _) in zip(datas, seeds, together, strict=True):
        alone = copy.deepcopy(model)
        train_local(alone, data, params, seed)
        for key in ("features.1.running_mean", "features.1.running_var"):
            assert torch.allclose(state[key], alone.state_dict()[key], atol=1e-5), key


def _dropout_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.Dropout(0.5), nn.Linear(32, 10)
    )


def test_dropout_is_batched_with_per_device_masks_reproducibly() -> None:
    model = _dropout_net()
    data = _devices(1, 16)[0]
    params = TrainParams(8, 1, 0.05, 0.0, 0.0)
    # Two devices with the same data and the same seed: only their masks differ.
    first, chunk = train_cohort(model, [data, data], params, [5, 5], chunk=2)
    assert chunk == 2
    (a, _), (b, _) = first  # type: ignore[misc]
    assert not torch.allclose(a["1.weight"], b["1.weight"])
    again, _ = train_cohort(model, [data, data], params, [5, 5], chunk=2)
    for (x, lx), (y, ly) in zip(first, again, strict=True):  # type: ignore[misc]
        assert lx == ly and all(torch.equal(x[k], y[k]) for k in x)


def _oom_above(limit: int, calls: list[int]) -> Step:
    def train(
        model: nn.Module, datas: Sequence[Tensors], params: TrainParams, seeds: Sequence[int]
    ) -> list[Trained]:
        calls.append(len(datas))
        if len(datas) > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return train_batched(model, datas, params, seeds)

    return train


def test_an_out_of_memory_chunk_is_halved_and_retried() -> None:
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8)
    datas, seeds = _devices(5, 8), [1, 2, 3, 4, 5]
    params = TrainParams(8, 1, 0.05, 0.9, 0.0)
    calls: list[int] = []
    results, chunk = train_cohort(model, datas, params, seeds, 8, _oom_above(2, calls))
    assert chunk == 2 and calls == [5, 2, 2, 1]
    whole = train_batched(model, datas, params, seeds)
    for got, expected in zip(results, whole, strict=True):
        assert got is not None and abs(got[1] - expected[1]) < 1e-5
    # A device that does not fit even alone is left to train by itself (None).
    nothing, _ = train_cohort(model, datas[:2], params, seeds[:2], 2, _oom_above(0, []))
    assert nothing == [None, None]


def test_other_errors_are_not_taken_for_out_of_memory() -> None:
    def broken(*args: object) -> list[Trained]:
        raise RuntimeError("shape mismatch")

    model = SmallCNN(3, 10, 8)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        train_cohort(model, _devices(2, 8), TrainParams(8, 1, 0.1, 0.0, 0.0), [1, 2], 2, broken)


def test_a_chunk_is_what_free_gpu_memory_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert chunk_for(cpu, 10**12, 100) == 100  # the CPU: no GPU memory limit
    monkeypatch.setattr("fedbench.train.batched.free_bytes", lambda device: 10 * 2**30)
    gpu = torch.device("cuda", 0)
    assert chunk_for(gpu, 2**30, 100) == int(10 * HEADROOM)  # 6 of 1 GiB in 10 GiB free
    assert chunk_for(gpu, 2**20, 100) == 100
    assert chunk_for(gpu, 100 * 2**30, 100) == 1  # not even one fits: try one, OOM decides


def test_a_cohort_that_does_not_fit_the_gpu_does_not_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(*args: object) -> list[Trained]:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")

    monkeypatch.setattr("fedbench.train.batched.train_batched", out_of_memory)
    model = SmallCNN(3, 10, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert not batching_pays(model, _devices(7, 8), TrainParams(8, 1, 0.05, 0.9, 0.0))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_vmapped_step_holds_at_most_max_vmap_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    import fedbench.train.batched as batched

    steps: list[int] = []

    def counting(fn, randomness="error"):  # type: ignore[no-untyped-def]
        mapped = torch.func.vmap(fn, randomness=randomness)

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
    # A GPU chunk smaller than the block wins, and a larger one is cut to the block.
    steps.clear()
    train_cohort(model, datas, params, seeds, chunk=2)
    assert max(steps) == 16
    steps.clear()
    train_cohort(model, datas, params, seeds, chunk=7)
    assert max(steps) == 24
    monkeypatch.setattr(batched, "MAX_VMAP_EXAMPLES", 10_000)  # all 7 in one block
    whole = train_batched(model, datas, params, seeds)
    for (a, loss_a), (b, loss_b) in zip(blocks, whole, strict=True):
        assert abs(loss_a - loss_b) < 1e-5
        assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


def test_batched_training_does_not_import_dynamo() -> None:
    # torch.func.grad imports torch._dynamo and sympy on its first call (~70 MB in every
    # Ray worker); batched training takes its gradients with plain autograd instead.
    code = (
        "import sys, torch\n"
        "from fedbench.data.source import Tensors\n"
        "from fedbench.models.small_cnn import SmallCNN\n"
        "from fedbench.train.batched import train_batched\n"
        "from fedbench.train.loop import TrainParams\n"
        "x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))\n"
        "datas = [Tensors(x, y) for _ in range(2)]\n"
        "train_batched(SmallCNN(), datas, TrainParams(4, 1, 0.1, 0.0, 0.0), [0, 1])\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
