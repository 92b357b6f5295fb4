"""runtime.enforce_caps: an emulated device's call runs under its real limits, then they lift."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest
import torch
import yaml
from flwr.app import ArrayRecord, Context, RecordDict

from fedbench.client.caps import capped, out_of_memory
from fedbench.client.seat import seat_of
from fedbench.paths import profiles_dir
from tests.bad_inputs import _typed
from tests.helpers import train_message


def _seat(tmp_path: Path, enforce: bool) -> object:
    data = yaml.safe_load((profiles_dir() / "rpi3bplus.yaml").read_text())
    data["name"] = "rpi3bplus_tiny"
    data["memory"]["train_budget_mb"] = 16
    profile = tmp_path / "rpi3bplus_tiny.yaml"
    profile.write_text(yaml.safe_dump(data))
    experiment = _typed(
        [
            f"fleet.devices=[{{profile:'{profile}',count:1}}]",
            f"runtime.enforce_caps={str(enforce).lower()}",
            "runtime.client_cpus=1",
            "strategy.clients_per_round=1",
        ]
    )
    msg = train_message(experiment, 0, ArrayRecord(torch.nn.Linear(2, 2).state_dict()))  # type: ignore[arg-type]
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    return seat_of(msg, context)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux CPU affinity")
def test_a_device_over_its_budget_fails_for_real_and_the_worker_recovers(tmp_path: Path) -> None:
    seat = _seat(tmp_path, enforce=True)
    before = (os.sched_getaffinity(0), resource.getrlimit(resource.RLIMIT_AS))
    with capped(seat):  # type: ignore[arg-type]
        assert torch.get_num_threads() == 1 and len(os.sched_getaffinity(0)) == 1
        torch.ones(1 << 20)  # 4 MB: within the 16 MB budget
        with pytest.raises((RuntimeError, MemoryError)) as error:
            torch.ones(64 << 20)  # 256 MB: the Pi's budget is 16 MB
        assert out_of_memory(error.value)
    assert (os.sched_getaffinity(0), resource.getrlimit(resource.RLIMIT_AS)) == before
    torch.ones(64 << 20)  # the worker serves its next device normally


def test_without_enforce_caps_only_threads_are_set(tmp_path: Path) -> None:
    seat = _seat(tmp_path, enforce=False)
    limits = resource.getrlimit(resource.RLIMIT_AS)
    with capped(seat):  # type: ignore[arg-type]
        assert resource.getrlimit(resource.RLIMIT_AS) == limits
        torch.ones(64 << 20)
