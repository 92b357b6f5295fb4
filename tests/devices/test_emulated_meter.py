"""EmulatedMeter: real training only when the emulated plan fits; every Cost field filled."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from fedbench.core.device import DeviceState
from fedbench.core.meter import Cost, TrainJob
from fedbench.devices.emulated_meter import EmulatedMeter
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import load_profile
from fedbench.errors import FedbenchError
from fedbench.measure.workload import measure_workload
from fedbench.models import build_model


def job(state: DeviceState | None = None, now_s: float = 1000.0) -> TrainJob:
    return TrainJob(
        model_name="lenet",
        input_shape=(1, 28, 28),
        batch_sizes=(16, 16, 16, 5),
        model_bytes=250_000,
        now_s=now_s,
        state=state,
    )


class Trainer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return 0.5


def measure(meter: EmulatedMeter, j: TrainJob) -> tuple[float | None, Cost, Trainer]:
    model, _ = build_model("lenet")
    trainer = Trainer()
    loss, cost = meter.measure(model, j, trainer)
    return loss, cost, trainer


def test_cost_fields_filled_and_training_runs() -> None:
    meter = EmulatedMeter.from_config(load_profile("meizu_16t"), {})
    assert meter.kind == "emulated"
    loss, cost, trainer = measure(meter, job())
    assert loss == 0.5 and trainer.calls == 1
    assert cost.status == "ok" and cost.plan == "bs16"
    for f in (
        "latency_s",
        "comm_s",
        "energy_j",
        "avg_power_w",
        "peak_mem_mb",
        "mem_budget_mb",
        "temp_c_start",
        "temp_c_end",
        "freq_ghz_avg",
        "throttled_frac",
        "battery_pct",
    ):
        assert math.isfinite(getattr(cost, f)), f
    assert cost.temp_c_start == load_profile("meizu_16t").thermal.ambient_c
    assert cost.temp_c_end > cost.temp_c_start
    assert cost.state_after is not None
    assert cost.state_after.time_s == pytest.approx(1000.0 + cost.latency_s)
    assert cost.extra["time_dense_s"] > 0 and "mem_saved_activations_mb" in cost.extra


def test_oom_skips_training() -> None:
    p = load_profile("rpi3bplus")
    tiny = dataclasses.replace(p, memory=dataclasses.replace(p.memory, train_budget_mb=1))
    loss, cost, trainer = measure(EmulatedMeter(tiny, Knobs()), job())
    assert loss is None and trainer.calls == 0
    assert cost.status == "oom" and cost.peak_mem_mb > cost.mem_budget_mb == 1


def test_state_carries_over_and_cools_while_idle() -> None:
    meter = EmulatedMeter(load_profile("rpi4"), Knobs())
    hot = DeviceState(temp_c=84.0, battery_pct=100.0, time_s=1000.0)
    _, right_after, _ = measure(meter, job(hot, now_s=1000.0))
    _, much_later, _ = measure(meter, job(hot, now_s=1000.0 + 3600.0))
    _, fresh, _ = measure(meter, job(None))
    assert right_after.temp_c_start == 84.0 and right_after.throttled_frac > 0
    assert much_later.temp_c_start < 50.0 and much_later.throttled_frac == 0
    assert right_after.latency_s > much_later.latency_s == pytest.approx(fresh.latency_s)


def test_host_threads_do_not_change_the_cost() -> None:
    meter = EmulatedMeter(load_profile("jetson_nano"), Knobs())
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _, one, _ = measure(meter, job())
        torch.set_num_threads(2)
        _, two, _ = measure(meter, job())
    finally:
        torch.set_num_threads(before)
    assert one == two


def test_bad_knobs_fail_at_construction() -> None:
    with pytest.raises(FedbenchError, match="fleet.knobs.cpus"):
        EmulatedMeter.from_config(load_profile("rpi4"), {"cpus": 2})
    with pytest.raises(FedbenchError, match="no cluster 'big'"):
        EmulatedMeter.from_config(load_profile("rpi4"), {"clusters": "big"})


def test_planner_hooks_match_the_emulator() -> None:
    meter = EmulatedMeter(load_profile("pixel2"), Knobs())
    model, shape = build_model("lenet")
    w = measure_workload(model, shape, 16, model_name="lenet")
    one = meter.emulate(model, dataclasses.replace(job(), batch_sizes=(16,)))
    assert meter.step_seconds(w) == pytest.approx(one.latency_s)
    assert meter.budget_mb(job()) == one.mem_budget_mb
