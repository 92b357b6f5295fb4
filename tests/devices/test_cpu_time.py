"""Work that is not torch is costed from its CPU time (fedbench.devices.cpu_time).

The conformance app tests/apps/conformance/sklearn_app trains a scikit-learn
LogisticRegression: no aten op. Costed by its ops alone, a Pixel 2 round was
0.13 ms and 0.27 mJ; it must now cost what its measured CPU time costs the
phone, and say so (`cost_basis=cpu_time`).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord

from fedbench.core.meter import Cost, WatchJob
from fedbench.devices.constants import load_constants
from fedbench.devices.cpu import main_thread, place
from fedbench.devices.cpu_time import serial_seconds
from fedbench.devices.emulated_meter import EmulatedMeter
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import load_profile
from fedbench.measure.usage import host_core_ghz
from tests.bad_inputs import _typed
from tests.helpers import client_report, run_client, train_message

SKLEARN_APP = Path(__file__).parents[1] / "apps" / "conformance" / "sklearn_app"
# What the op trace alone gave the app's round on a pixel2 (the figures).
OPS_ONLY_S, OPS_ONLY_J = 0.00015, 0.00034


def _busy_numpy(cpu_s: float) -> None:
    """Numpy work of at least `cpu_s` process CPU seconds."""
    rng = np.random.default_rng(0)
    a = rng.random((200, 200))
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        np.linalg.inv(a + np.eye(200))


def _watched(profile: str, work: object, *args: object) -> Cost:
    meter = EmulatedMeter.from_config(load_profile(profile), {})
    with meter.watch(WatchJob("call", 4_000, 0.0, None)) as watch:
        work(*args)  # type: ignore[operator]
    return watch.cost()


def test_the_sklearn_apps_round_costs_its_cpu_time_on_a_phone() -> None:
    sys.path.insert(0, str(SKLEARN_APP))  # the app's own modules, as Flower puts it on the path
    from sklearn_lr_app.task import initial_arrays

    experiment = _typed([f"app={SKLEARN_APP}", "fleet.devices=[{profile:pixel2,count:3}]"])
    reports = []
    for round_ in (1, 2):  # the second: a warm worker, the app's one-time work done
        msg = train_message(experiment, 1, ArrayRecord(initial_arrays()), round_=round_)
        reports.append(client_report(run_client(msg)))
    for report in reports:
        assert report.status == "ok" and report.kind == "emulated"
        assert report.cost_basis == "cpu_time"
        # 5 L-BFGS steps take the 2-core test host about 4.5 ms of CPU: over 1 ms on the
        # phone, where the ops alone said 0.15 ms.
        assert report.latency_s > max(1e-3, 10 * OPS_ONLY_S), report
        assert report.energy_j > 10 * OPS_ONLY_J, report
        assert report.peak_mem_mb > 0 and report.temp_c_end > report.temp_c_start


def test_cpu_time_is_scaled_by_the_hosts_and_the_devices_core() -> None:
    cost = _watched("pixel2", _busy_numpy, 0.05)
    assert cost.cost_basis == "cpu_time" and cost.status == "ok"
    outside = cost.extra["host_cpu_outside_ops_s"]
    assert outside >= 0.05
    # device_s = cycles / (f_main x ipc_main x 1e9), cycles = outside x host_ghz x 1e9
    profile = load_profile("pixel2")
    consts = load_constants()
    main = main_thread(place(profile, Knobs(), consts, None), consts)
    ipc = consts.core_ipc_scale(main.cluster.arch)
    expected = outside * host_core_ghz() / (main.freq_ghz * ipc)
    assert cost.extra["time_measured_s"] == pytest.approx(expected, rel=1e-9)
    # No step's overhead, no op: on top, only faulting in the memory the call grew by.
    others = {k: v for k, v in cost.extra.items() if k.startswith("time_") and v}
    assert set(others) <= {"time_measured_s", "time_fault_s"}, others
    assert cost.latency_s == pytest.approx(sum(others.values()), rel=1e-9)
    # Its energy is the main core's and the idle power's over that time.
    assert cost.energy_j == pytest.approx(cost.extra["energy_cpu_j"] + cost.extra["energy_idle_j"])
    assert cost.energy_j > 0.05 * profile.power.idle_w
    # The same cycles take an in-order Cortex-A53 at 1.4 GHz longer.
    pi3 = load_profile("rpi3bplus")
    cycles = outside * host_core_ghz() * 1e9
    assert serial_seconds(pi3, Knobs(), 1.0, cycles) > 1.5 * serial_seconds(
        profile, Knobs(), 1.0, cycles
    )


def _train_steps(model: torch.nn.Module, steps: int) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(64, 256)
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()


def _mixed(model: torch.nn.Module, numpy_s: float) -> None:
    _train_steps(model, 3)
    _busy_numpy(numpy_s)  # a numpy stretch between two of its torch steps
    _train_steps(model, 3)


def test_a_torch_call_keeps_its_exact_ops_cost_and_a_mixed_one_adds_its_numpy() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))
    _watched("rpi3bplus", _train_steps, model, 6)  # warm: the first call's one-time work
    torch_only = [_watched("rpi3bplus", _mixed, model, 0.0) for _ in range(2)]
    assert {c.cost_basis for c in torch_only} == {"ops"}
    assert torch_only[0].latency_s == torch_only[1].latency_s  # exact, not measured
    assert torch_only[0].energy_j == torch_only[1].energy_j
    mixed = _watched("rpi3bplus", _mixed, model, 0.1)
    assert mixed.cost_basis == "ops+cpu_time"
    numpy_s = mixed.extra["time_measured_s"]
    assert mixed.extra["host_cpu_outside_ops_s"] >= 0.1 and numpy_s > 0.1
    # Never silently dropped: the ops' own cost and the numpy's, both there.
    ops_s = torch_only[0].latency_s
    assert mixed.latency_s == pytest.approx(ops_s + numpy_s, rel=0.05)
    assert mixed.energy_j > torch_only[0].energy_j


def test_the_hosts_clock_comes_from_cpufreq_then_cpuinfo(tmp_path: Path) -> None:
    host_core_ghz.cache_clear()
    try:
        cpu0 = tmp_path / "freq" / "sys/devices/system/cpu/cpu0/cpufreq"
        cpu0.mkdir(parents=True)
        (cpu0 / "cpuinfo_max_freq").write_text("3400000\n")
        assert host_core_ghz(tmp_path / "freq") == pytest.approx(3.4)
        info = tmp_path / "info" / "proc"
        info.mkdir(parents=True)
        (info / "cpuinfo").write_text("processor\t: 0\ncpu MHz\t\t: 2596.132\n")
        assert host_core_ghz(tmp_path / "info") == pytest.approx(2.596132)
        assert host_core_ghz(tmp_path / "nothing") == 3.0  # DEFAULT_HOST_GHZ
    finally:
        host_core_ghz.cache_clear()
    assert math.isfinite(host_core_ghz()) and host_core_ghz() > 0
