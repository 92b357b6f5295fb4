"""Caching of workloads and independence from the host's thread count."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fedbench.core.workload import Workload
from fedbench.measure import workload as workload_module
from fedbench.measure.workload import measure_workload
from fedbench.paths import cache_dir


def _net(width: int = 8) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=1, groups=width),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(width, 4),
    )


def _files() -> list[Path]:
    return sorted((cache_dir() / "workloads").glob("*.json"))


def test_cache_hit_returns_the_equal_object_in_process_and_from_file() -> None:
    first = measure_workload(_net(), (3, 8, 8), 4, model_name="net")
    assert measure_workload(_net(), (3, 8, 8), 4, model_name="net") is first
    assert len(_files()) == 1
    workload_module._MEMO.clear()
    from_file = measure_workload(_net(), (3, 8, 8), 4, model_name="net")
    assert from_file == first and from_file is not first
    assert isinstance(from_file.input_shape, tuple)


def test_cache_key_separates_structure_and_arguments() -> None:
    base = measure_workload(_net(), (3, 8, 8), 4, model_name="net")
    wider = measure_workload(_net(16), (3, 8, 8), 4, model_name="net")
    batch = measure_workload(_net(), (3, 8, 8), 8, model_name="net")
    plan = measure_workload(_net(), (3, 8, 8), 4, model_name="net", plan="2x2", microbatches=2)
    assert len(_files()) == 4
    assert len({base.total_flops, wider.total_flops, batch.total_flops}) == 3
    assert plan.plan == "2x2" and plan.saved_activation_bytes < base.saved_activation_bytes


def test_round_trip_through_dict_is_exact() -> None:
    w = measure_workload(_net(), (3, 8, 8), 4, model_name="net", cache=False)
    assert Workload.from_dict(w.to_dict()) == w


def test_thread_count_does_not_change_the_workload() -> None:
    torch.set_num_threads(1)
    one = measure_workload(_net(16), (3, 16, 16), 8, model_name="net", cache=False)
    torch.set_num_threads(2)
    two = measure_workload(_net(16), (3, 16, 16), 8, model_name="net", cache=False)
    assert one == two


def test_measuring_leaves_the_callers_rng_and_grad_mode_alone() -> None:
    model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.Linear(6, 2))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    with torch.no_grad():  # a caller inside no_grad still gets a training step
        w = measure_workload(model, (6,), 4, model_name="drop", cache=False)
    assert torch.equal(torch.rand(3), expected)
    assert w.backward["dense"].flops > 0
