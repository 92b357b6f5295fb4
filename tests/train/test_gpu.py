"""Training on a real CUDA GPU gives what the CPU gives (skipped without one).

CI is CPU-only: these run on a GPU host, `bash benchmarks/gpu.sh`. Each is
small (seconds); tolerances are those of other kernels and summation orders.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fedbench.algorithms.fedprox import Proximal
from fedbench.data.source import Tensors
from fedbench.measure.workload import measure_workload
from fedbench.models.small_cnn import SmallCNN
from fedbench.train.accelerator import free_bytes, resolve
from fedbench.train.batched import train_batched, train_cohort
from fedbench.train.loop import TrainParams, train_local
from fedbench.train.optimizers import NAMED, LocalOptimizer
from fedbench.train.resident import Resident

pytestmark = pytest.mark.gpu
TOLERANCE = 1e-3
PARAMS = TrainParams(8, 1, 0.05, 0.9, 5e-4)


def _devices(n: int, size: int, device: torch.device) -> list[Tensors]:
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        x, y = torch.randn(size, 3, 16, 16, generator=g), torch.randint(0, 10, (size,), generator=g)
        out.append(Tensors(x.to(device), y.to(device)))
    return out


def test_auto_picks_the_gpu() -> None:
    assert resolve("auto").type == "cuda"
    assert free_bytes(torch.device("cuda", 0)) > 0  # type: ignore[operator]


def test_local_training_on_the_gpu_matches_the_cpu() -> None:
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8)
    cpu_data = _devices(1, 24, torch.device("cpu"))[0]
    gpu = copy.deepcopy(model).cuda()
    on_cpu = train_local(model, cpu_data, PARAMS, seed=3)
    on_gpu = train_local(gpu, Tensors(cpu_data.x.cuda(), cpu_data.y.cuda()), PARAMS, seed=3)
    assert abs(on_cpu - on_gpu) < TOLERANCE
    for (key, a), b in zip(model.state_dict().items(), gpu.state_dict().values(), strict=True):
        assert torch.allclose(a.double(), b.cpu().double(), atol=TOLERANCE), key


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_a_cohort_on_the_gpu_matches_one_device_after_another(optimizer: str) -> None:
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8).cuda()
    local = LocalOptimizer(NAMED[optimizer])
    params = TrainParams(8, 1, 0.01, 0.9, 0.0, optimizer=local, halves=(Proximal(0.1),))
    datas, seeds = _devices(6, 16, torch.device("cuda")), [1, 2, 3, 4, 5, 6]
    results, chunk = train_cohort(model, datas, params, seeds, chunk=4)
    assert chunk == 4 and len(results) == 6
    for data, seed, result in zip(datas, seeds, results, strict=True):
        assert result is not None
        alone = copy.deepcopy(model)
        assert abs(result[1] - train_local(alone, data, params, seed)) < TOLERANCE
        # weights (BatchNorm-normalised biases aside: float noise that Adam amplifies)
        for key, value in alone.state_dict().items():
            if optimizer == "sgd" or "running" in key or "classifier" in key:
                assert torch.allclose(result[0][key].double(), value.double(), atol=1e-2), key


def test_dropout_models_are_batched_on_the_gpu() -> None:
    """Issue 23's mobilenetv2 failure: vmap refused dropout in its default randomness mode."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Dropout(0.2), nn.Linear(8 * 14 * 14, 10)
    ).cuda()
    datas = _devices(4, 16, torch.device("cuda"))
    first = train_batched(model, datas, PARAMS, [1, 2, 3, 4])
    torch.manual_seed(7)
    again = train_batched(model, datas, PARAMS, [1, 2, 3, 4])
    assert all(torch.isfinite(torch.tensor(loss)) for _, loss in first)
    torch.manual_seed(7)
    third = train_batched(model, datas, PARAMS, [1, 2, 3, 4])
    assert [loss for _, loss in again] == [loss for _, loss in third]  # same seed, same masks


def test_the_workload_does_not_depend_on_where_the_model_lives() -> None:
    torch.manual_seed(0)
    model = SmallCNN(3, 10, 8)
    kw = {"model_name": "small_cnn", "cache": False}
    on_cpu = measure_workload(model, (3, 16, 16), 16, **kw)  # type: ignore[arg-type]
    on_gpu = measure_workload(copy.deepcopy(model).cuda(), (3, 16, 16), 16, **kw)  # type: ignore[arg-type]
    assert on_cpu.to_dict() == on_gpu.to_dict()
    assert next(model.parameters()).device.type == "cpu"


def test_device_data_stays_on_the_gpu_across_rounds() -> None:
    resident = Resident(torch.device("cuda", 0))
    assert resident.budget > 0
    cpu = _devices(1, 32, torch.device("cpu"))[0]
    first = resident.get(7, lambda: cpu)
    second = resident.get(7, lambda: pytest.fail("loaded again"))  # type: ignore[arg-type, return-value]
    assert first.x.is_cuda and second is first and resident.copies == 1 and resident.hits == 1
    assert torch.equal(first.x.cpu(), cpu.x)
