"""ProbeMeter: real training measured into a Cost, on this host and on device trees."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from fedbench.core.meter import Meter, TrainJob
from fedbench.devices.probe_meter import ProbeMeter
from fedbench.errors import FedbenchError
from fedbench.measure.probe import PowerSource, default_sources

FIXTURES = Path(__file__).parent / "fixtures"


def tiny_training(model: nn.Module, steps: int = 5) -> float:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 16, 16, generator=gen)
    y = torch.randint(0, 4, (8,), generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return sum(losses) / len(losses)


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, 4),
    )  # fmt: skip


JOB = TrainJob("tiny", (3, 16, 16), (8, 8, 8, 8, 4), 1000, 0.0, None)


def test_probe_meter_on_this_host() -> None:
    meter = ProbeMeter()
    assert isinstance(meter, Meter) and meter.kind == "physical"
    model = tiny_model()

    def train_for_a_while() -> float:
        # /proc/stat counts 10 ms ticks: a window shorter than a tick has no
        # utilisation figure (NaN), so train for ~0.1 s.
        end = time.perf_counter() + 0.1
        loss = tiny_training(model)
        while time.perf_counter() < end:
            loss = tiny_training(model)
        return loss

    start = time.perf_counter()
    loss, cost = meter.measure(model, JOB, train_for_a_while)
    wall = time.perf_counter() - start
    assert loss is not None and math.isfinite(loss)
    assert cost.status == "ok" and cost.plan == "bs8"
    assert 0.1 <= cost.latency_s <= wall
    assert cost.mem_budget_mb > 0
    assert cost.peak_mem_mb >= 0.0
    assert cost.extra["peak_rss_mb"] >= cost.extra["rss_start_mb"] > 0
    assert 0.0 <= cost.extra["cpu_util_avg"] <= 1.0
    assert cost.extra["probe_samples"] >= 3
    assert math.isnan(cost.comm_s)  # the meter does not see the network
    # Power figures exactly when the host has a power sensor, NaN otherwise.
    present = {s.name for s in default_sources(Path("/")) if s.available()}
    has_power = any(
        isinstance(s, PowerSource) for s in default_sources(Path("/")) if s.name in present
    )
    assert math.isnan(cost.energy_j) != has_power
    assert math.isnan(cost.avg_power_w) != has_power
    assert math.isnan(cost.battery_pct) != ("battery_level" in present)
    assert math.isnan(cost.temp_c_start) != bool({"thermal", "hwmon_temp"} & present)


def test_probe_meter_on_a_jetson_tree() -> None:
    model = tiny_model()
    _, cost = ProbeMeter(interval_s=0.005, root=FIXTURES / "jetson_tx2").measure(
        model, JOB, lambda: tiny_training(model)
    )
    assert cost.avg_power_w == pytest.approx(7.466)
    assert cost.energy_j == pytest.approx(7.466 * cost.latency_s)
    assert cost.temp_c_start == cost.temp_c_end == pytest.approx(47.5)
    assert cost.mem_budget_mb == pytest.approx(6273860 / 1024)
    assert cost.freq_ghz_avg == pytest.approx((4 * 2.0352 + 2 * 1.4208) / 6)
    assert cost.throttled_frac == 1.0
    assert math.isnan(cost.battery_pct)
    # The tree's process memory does not move: no growth.
    assert cost.peak_mem_mb == 0.0


def test_probe_meter_on_a_phone_tree() -> None:
    model = tiny_model()
    _, cost = ProbeMeter(root=FIXTURES / "android_phone").measure(
        model, JOB, lambda: tiny_training(model, steps=2)
    )
    assert cost.avg_power_w == pytest.approx(0.512 * 3.987)
    assert cost.battery_pct == 76.0
    assert cost.temp_c_start == pytest.approx(47.9)
    assert math.isnan(cost.mem_budget_mb)  # the tree has no /proc
    assert math.isnan(cost.peak_mem_mb)
    assert math.isnan(cost.freq_ghz_avg)


def test_probe_stops_when_training_fails() -> None:
    def failing() -> float:
        raise RuntimeError("diverged")

    with pytest.raises(RuntimeError, match="diverged"):
        ProbeMeter().measure(tiny_model(), JOB, failing)
    assert not any(t.name == "fedbench-probe" for t in threading.enumerate())


def test_probe_meter_rejects_a_bad_interval() -> None:
    with pytest.raises(FedbenchError, match="interval_s=-1"):
        ProbeMeter(interval_s=-1)


def test_physical_budget_is_the_memory_available_now() -> None:
    import psutil

    from fedbench.core.meter import TrainJob
    from fedbench.devices.probe_meter import ProbeMeter

    job = TrainJob("small_cnn", (3, 32, 32), (8,), 1000, 0.0, None)
    meter = ProbeMeter()
    budget = meter.budget_mb(job)
    total = psutil.virtual_memory().total / 2**20
    assert budget is not None and 0 < budget <= total
    read = meter.budget_fn(None, job)  # type: ignore[arg-type]
    assert read is not None and 0 < read(3) <= total
