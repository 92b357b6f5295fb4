"""runtime.accelerator: spelled right, honoured only where the host has it, resolved once.

No CUDA here: the selection logic is tested against a mocked torch.cuda, the
data cache on the "meta" device; tests/train/test_gpu.py runs on a real GPU.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.measure.step import cpu_copy
from fedbench.runtime.simulation import SimulationRuntime
from fedbench.train import accelerator
from fedbench.train.accelerator import (
    ACCELERATOR_ENV,
    check,
    check_host,
    gpu_share,
    host_record,
    resolve,
    worker_device,
)
from fedbench.train.resident import Resident, nbytes


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.parametrize("value", ["auto", "cpu", "cuda", "cuda:0", "cuda:11"])
def test_valid_spellings(value: str) -> None:
    assert check(value) == value


@pytest.mark.parametrize("value", ["gpu", "CUDA", "cuda:", "cuda:x", "mps", "", 0, None])
def test_a_bad_spelling_is_one_line_naming_the_key(value: object) -> None:
    with pytest.raises(FedbenchError) as error:
        check(value)
    assert str(error.value) == f"runtime.accelerator={value!r}: valid: auto, cpu, cuda, cuda:N"


@pytest.mark.usefixtures("no_gpu")
def test_without_cuda_auto_is_the_cpu_and_cuda_is_refused() -> None:
    assert resolve("auto") == torch.device("cpu") and resolve("cpu") == torch.device("cpu")
    for value in ("cuda", "cuda:0"):
        with pytest.raises(
            FedbenchError, match=rf"runtime.accelerator={value}: torch sees no CUDA"
        ):
            check_host(value)
    check_host("auto")  # never refused: it falls back


@pytest.mark.usefixtures("two_gpus")
def test_with_two_gpus_auto_is_cuda_and_a_third_is_refused() -> None:
    assert resolve("auto") == torch.device("cuda")
    assert resolve("cuda") == torch.device("cuda", 0)
    assert resolve("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(
        FedbenchError, match=r"cuda:2: this host has 2 CUDA GPU\(s\); choose cuda:0"
    ):
        check_host("cuda:2")


@pytest.mark.usefixtures("two_gpus")
def test_a_worker_takes_the_runtimes_resolved_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ACCELERATOR_ENV, "cpu")
    assert worker_device("auto") == torch.device("cpu")  # the runtime gave it no GPU share
    monkeypatch.delenv(ACCELERATOR_ENV)
    assert worker_device("cuda:1") == torch.device("cuda", 1)  # `flwr run`: the setting


def test_the_gpu_share_of_a_worker() -> None:
    assert gpu_share("cpu", 2, 8, None) == 0.0
    assert gpu_share("auto", 0, 8, None) == 0.0  # no GPU: the CPU
    assert gpu_share("auto", 1, 16, None) == 0.0625  # 16 workers share one GPU
    assert gpu_share("cuda", 2, 3, None) == 0.6666  # rounded down: all 3 still fit on 2
    assert gpu_share("cuda", 4, 2, None) == 1.0  # at most one GPU each
    assert gpu_share("cuda", 1, 16, 0.25) == 0.25  # runtime.gpus_per_worker
    assert gpu_share("cuda", 1, 20_000, None) == 0.0001  # Ray's smallest fraction


def test_the_simulation_runtime_checks_its_keys() -> None:
    with pytest.raises(FedbenchError, match="runtime.accelerator='tpu': valid: auto, cpu"):
        SimulationRuntime(accelerator="tpu")
    for bad in (0, 1.5, -0.5, True, "half"):
        with pytest.raises(FedbenchError, match=r"runtime.gpus_per_worker=.*in \(0, 1\], or null"):
            SimulationRuntime(gpus_per_worker=bad)  # type: ignore[arg-type]
    SimulationRuntime(accelerator="cuda:1", gpus_per_worker=0.5)  # the host is checked later


@pytest.mark.usefixtures("two_gpus")
def test_local_ray_workers_inherit_their_accelerator() -> None:
    # Exactly these keys: no fixed glibc mmap threshold either (fedbench.runtime.heap).
    assert SimulationRuntime(accelerator="cpu")._local_worker_env() == {ACCELERATOR_ENV: "cpu"}
    assert SimulationRuntime()._local_worker_env() == {ACCELERATOR_ENV: "cuda"}
    assert SimulationRuntime(accelerator="cuda:1")._local_worker_env() == {
        ACCELERATOR_ENV: "cuda",
        "CUDA_VISIBLE_DEVICES": "1",  # Ray hands out GPU 1 only
    }


@pytest.mark.usefixtures("no_gpu")
def test_preflight_refuses_cuda_on_a_cpu_host_but_not_for_a_cluster() -> None:
    from fedbench.runtime.simulation import SimulationRuntime as Sim

    with pytest.raises(FedbenchError, match="runtime.accelerator=cuda: torch sees no CUDA"):
        Sim(accelerator="cuda").preflight(None)  # type: ignore[arg-type]
    with pytest.raises(FedbenchError, match="a Ray cluster's GPUs are Ray's to hand out"):
        Sim(accelerator="cuda:0", ray_address="auto").preflight(None)  # type: ignore[arg-type]
    Sim(accelerator="cuda", ray_address="auto").preflight(None)  # type: ignore[arg-type]


@pytest.mark.usefixtures("no_gpu")
def test_provenance_says_where_the_run_trained() -> None:
    assert host_record("auto") == {
        "accelerator": "auto",
        "accelerator_device": "cpu",
        "cuda": torch.version.cuda,
        "gpus": [],
    }
    assert host_record("cuda")["accelerator_device"] == "cuda"  # a cluster's, not this host's


def _data(rows: int, seed: int) -> Tensors:
    g = torch.Generator().manual_seed(seed)
    return Tensors(
        torch.randn(rows, 1, 2, 2, generator=g), torch.randint(0, 3, (rows,), generator=g)
    )


def test_device_data_stays_resident_within_a_budget() -> None:
    meta = torch.device("meta")  # a device that is not the CPU, with no memory behind it
    one = nbytes(_data(10, 0))
    resident = Resident(meta, budget=2 * one)
    loads: list[int] = []

    def load(i: int) -> Tensors:
        loads.append(i)
        return _data(10, i)

    for key in (0, 1, 0, 1):
        data = resident.get(key, lambda key=key: load(key))
        assert data.x.device == meta and data.x.shape == (10, 1, 2, 2)
    assert loads == [0, 1] and resident.hits == 2 and resident.copies == 2
    resident.get(2, lambda: load(2))  # over the budget: the least recently used (0) goes
    assert len(resident) == 2 and resident.used == 2 * one
    resident.get(1, lambda: load(1))
    resident.get(0, lambda: load(0))
    assert loads == [0, 1, 2, 0]
    huge = Resident(meta, budget=one - 1)  # too big to keep: copied every time
    huge.get(0, lambda: load(0))
    huge.get(0, lambda: load(0))
    assert huge.copies == 2 and len(huge) == 0


def test_on_the_cpu_nothing_is_copied_or_kept() -> None:
    resident = Resident(torch.device("cpu"))
    data = _data(4, 0)
    assert resident.get(0, lambda: data) is data and len(resident) == 0


def test_the_workload_is_measured_on_a_cpu_copy_that_shares_nothing() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    copy = cpu_copy(model)
    for (name, a), b in zip(model.state_dict().items(), copy.state_dict().values(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr(), name
    assert accelerator.free_bytes(torch.device("cpu")) is None


def test_workers_are_what_cpus_and_gpu_shares_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 2.0})
    assert SimulationRuntime().workers() == 16  # 0.125 of a GPU each: all 16 run at once
    assert SimulationRuntime(gpus_per_worker=0.5).workers() == 4  # 2 GPUs, half each
    assert SimulationRuntime(accelerator="cpu").workers() == 16
    assert SimulationRuntime(client_cpus=4, gpus_per_worker=1.0).workers() == 2
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0})
    assert SimulationRuntime(gpus_per_worker=0.5).workers() == 16  # no GPU: the CPUs decide


def test_a_devices_data_is_kept_under_what_names_it() -> None:
    from fedbench.scenarios.base import build_scenario
    from fedbench.scenarios.context import data_context
    from tests.bad_inputs import _typed

    rounds = _typed(["scenario=rounds", "scenario.rounds=3"])
    scenario = build_scenario(rounds)  # type: ignore[arg-type]
    assert scenario.data_key(3, 1) == scenario.data_key(3, 2) != scenario.data_key(4, 1)
    ctx = data_context(rounds, 3)  # type: ignore[arg-type]
    assert torch.equal(scenario.device_data(ctx, 1, 1).x, scenario.device_data(ctx, 1, 2).x)
    daily = build_scenario(_typed(["experiment=smoke"]))  # type: ignore[arg-type]
    assert daily.data_key(3, 1) != daily.data_key(3, 2)  # a new day, new data


@pytest.mark.usefixtures("two_gpus")
def test_capped_workers_train_on_the_cpu_and_a_capped_gpu_is_refused() -> None:
    # A capped call is forked from its worker (fedbench.client.caps): CUDA cannot start
    # there, so `auto` means the CPU and an explicit GPU is one line naming both keys.
    capped = SimulationRuntime(enforce_caps=True)
    assert capped.worker_accelerator() == "cpu"
    assert capped._local_worker_env() == {ACCELERATOR_ENV: "cpu"}
    assert capped._gpu_share(2.0, 4) == 0.0
    assert SimulationRuntime().worker_accelerator() == "auto"
    for value in ("cuda", "cuda:1"):
        with pytest.raises(
            FedbenchError, match=f"runtime.accelerator={value} with runtime.enforce_caps=true"
        ):
            SimulationRuntime(enforce_caps=True, accelerator=value)
