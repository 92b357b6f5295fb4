"""Memory budgets that change: profile pressure, the planned plan's cost, mid-round re-planning."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import torch
import yaml

from fedbench.core.meter import TrainJob
from fedbench.core.plans import FULL, Plan, PlanLog
from fedbench.data.source import Tensors
from fedbench.devices.budget import budget_at, step_runs
from fedbench.devices.emulated_meter import EmulatedMeter
from fedbench.devices.emulator import Emulation, emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import DeviceProfile, parse_profile
from fedbench.errors import FedbenchError
from fedbench.measure.workload import Workload, measure_workload
from fedbench.paths import profiles_dir
from fedbench.train.loop import TrainParams, step_sizes, train_local
from fedbench.train.round_plan import plan_round
from tests.train.nets import Trunked

HOUR = 3600.0
SHAPE = (3, 16, 16)


def _raw(budget_mb: int = 16, pressure: list[list[float]] | None = None) -> dict[str, Any]:
    data = yaml.safe_load((profiles_dir() / "rpi4.yaml").read_text())
    data["memory"]["train_budget_mb"] = budget_mb
    data["sources"]["memory.train_budget_mb"] = "test: a tiny budget"
    if pressure is not None:
        data["memory"]["pressure"] = pressure
        data["sources"]["memory.pressure"] = "test: other apps during the day"
    return data


def _profile(budget_mb: int = 16, pressure: list[list[float]] | None = None) -> DeviceProfile:
    return parse_profile(_raw(budget_mb, pressure), "test.yaml")


def test_pressure_scales_the_budget_by_hour() -> None:
    p = _profile(1000, [[8, 20, 0.5], [22, 6, 0.25], [12, 13, 0.4]])
    assert budget_at(p, 7.9 * HOUR) == 1000
    assert budget_at(p, 8 * HOUR) == 500
    assert budget_at(p, 12.5 * HOUR) == 400  # overlapping windows: the smallest fraction
    assert budget_at(p, 23 * HOUR) == 250 and budget_at(p, 24 * HOUR + 3 * HOUR) == 250
    assert budget_at(_profile(1000), 12 * HOUR) == 1000  # no pressure: the budget


@pytest.mark.parametrize(
    ("pressure", "sourced", "needle"),
    [
        ([[8, 20, 1.5]], True, r"memory\.pressure\.0\.2: expected fraction in \[0\.01, 1\]"),
        ([[8, 8, 0.5]], True, r"memory\.pressure\.0: expected start hour != end hour"),
        ([[8, 20]], True, r"memory\.pressure\.0: expected a list of 3 items"),
        ([[8, 20, 0.5]], False, r"sources\.memory\.pressure.*missing"),
    ],
)
def test_bad_pressure_is_refused(pressure: list[list[float]], sourced: bool, needle: str) -> None:
    raw = _raw(16, pressure)
    if not sourced:
        del raw["sources"]["memory.pressure"]
    with pytest.raises(FedbenchError, match=needle):
        parse_profile(raw, "test.yaml")


def _job(now_s: float = 0.0, sizes: tuple[int, ...] = (32,) * 10, plan: Plan = FULL) -> TrainJob:
    return TrainJob("trunked16", SHAPE, sizes, 50_000, now_s, None, plan=plan)


@pytest.fixture(scope="module")
def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return Trunked(norm=True, width=16)


def test_the_emulator_costs_the_jobs_plan(net: torch.nn.Module) -> None:
    meter = EmulatedMeter(_profile(16), Knobs())
    full = meter.emulate(net, _job())
    planned = meter.emulate(net, _job(plan=Plan(4, 5)))
    w = measure_workload(
        net,
        SHAPE,
        32,
        model_name="trunked16",
        microbatches=4,
        checkpoint_segments=5,
        plan="4x8+ckpt5",
    )
    assert planned.peak_mem_mb == pytest.approx(w.peak_bytes / 2**20)
    assert planned.peak_mem_mb < full.peak_mem_mb
    # Recompute and the smaller kernels cost compute and per-call time; the
    # smaller micro-batch's im2col fits the cache, which the full batch's
    # does not, so the total can go either way.
    assert planned.time_s["dense"] > full.time_s["dense"]
    assert planned.time_s["dispatch"] > full.time_s["dispatch"]
    assert planned.time_s["unfold"] < full.time_s["unfold"]
    # A short last step keeps the micro-batch size: 20 examples as 4 slices of 5.
    assert step_runs(_job(sizes=(32, 32, 20), plan=Plan(4))) == [
        (Plan(4), 32, 2),
        (Plan(4), 20, 1),
    ]


def test_planner_makes_an_oom_device_train(net: torch.nn.Module) -> None:
    meter = EmulatedMeter(_profile(16, [[0, 24, 0.25]]), Knobs())  # 4 MB all day
    job = _job()
    off = plan_round(net, job, meter, "off")
    assert meter.emulate(net, off.job).status == "oom"
    auto = plan_round(net, job, meter, "auto")
    assert auto.choice is not None and auto.choice.feasible
    em = meter.emulate(net, auto.job)
    assert em.status == "ok" and em.peak_mem_mb <= 4.0 and em.mem_budget_mb == 4.0


def test_a_share_of_the_budget_plans_for_less_and_says_why(net: torch.nn.Module) -> None:
    """After a real out-of-memory under enforce_caps the device is planned for less."""
    meter = EmulatedMeter(_profile(16, None), Knobs())
    whole = plan_round(net, _job(), meter, "auto")
    part = plan_round(net, _job(), meter, "auto", share=0.25)  # 4 of its 16 MB
    assert whole.job.plan == FULL and part.job.plan != FULL
    planned = meter.emulate(net, part.job)
    assert planned.status == "ok" and planned.peak_mem_mb <= 4.0
    assert planned.mem_budget_mb == 16.0  # the device's budget is still the budget reported
    assert part.explain(planned.to_cost(0.0, "x")).reason.startswith("planned for 25% of")
    assert whole.explain(meter.emulate(net, whole.job).to_cost(0.0, "x")).reason == ""


def test_a_reduced_plan_says_what_the_full_batch_needs(net: torch.nn.Module) -> None:
    """A reduced plan's cost carries the full batch's predicted peak (rounds.csv plan_needed_mb)."""
    meter = EmulatedMeter(_profile(16, None), Knobs())
    whole = plan_round(net, _job(), meter, "auto")
    part = plan_round(net, _job(), meter, "auto", share=0.25)
    full = meter.emulate(net, whole.job)
    needed = part.explain(meter.emulate(net, part.job).to_cost(0.0, "x")).extra["plan_needed_mb"]
    assert needed == pytest.approx(full.peak_mem_mb, rel=1e-6) and needed > 4.0
    assert "plan_needed_mb" not in whole.explain(full.to_cost(0.0, "x")).extra
    off = plan_round(net, _job(), meter, "off")
    assert "plan_needed_mb" not in off.explain(full.to_cost(0.0, "x")).extra


def test_a_plan_reduced_for_the_resident_set_says_what_the_full_batch_holds(
    net: torch.nn.Module,
) -> None:
    """Far under its budget, an MNN phone micro-batches: the full batch's resident set is why."""
    data = yaml.safe_load((profiles_dir() / "honor8.yaml").read_text())
    data["memory"]["available_mb"] = 168  # the full batch's process holds ~171 MB
    data["sources"]["memory.available_mb"] = "test: just under the full batch's resident set"
    meter = EmulatedMeter(parse_profile(data, "test.yaml"), Knobs())
    rp = plan_round(net, _job(), meter, "auto")
    assert rp.job.plan != FULL
    ran = meter.emulate(net, rp.job)
    assert ran.status == "ok" and ran.peak_mem_mb < ran.mem_budget_mb / 100  # 1 GB budget
    full = meter.emulate(net, dataclasses.replace(rp.job, plan=FULL, plan_log=None))
    assert full.peak_mem_mb < ran.mem_budget_mb  # its tensors fit: not what ruled it out
    needed = rp.explain(ran.to_cost(0.0, "x")).extra["plan_needed_mb"]
    assert needed == pytest.approx(full.rss_mb, rel=1e-6) and needed > 168


def _data(n: int) -> Tensors:
    gen = torch.Generator().manual_seed(0)
    return Tensors(torch.randn(n, *SHAPE, generator=gen), torch.randint(0, 10, (n,), generator=gen))


def test_budget_drop_mid_round_replans_at_the_emulated_time(net: torch.nn.Module) -> None:
    profile = _profile(16, [[10, 12, 0.25]])  # 16 MB, 4 MB from 10:00 to 12:00
    meter = EmulatedMeter(profile, Knobs())
    params = TrainParams(batch_size=32, local_epochs=1, lr=0.01, momentum=0.9, weight_decay=5e-4)
    sizes = step_sizes(320, 32, 1)
    full_step = meter.emulate(net, _job(sizes=(32,))).latency_s
    start = 10 * HOUR - 3.5 * full_step  # pressure begins during the 4th step
    job = _job(start, sizes)
    rp = plan_round(net, job, meter, "auto")
    assert rp.job.plan == FULL and rp.adapt is not None
    model = copy.deepcopy(net)
    loss, cost = meter.measure(
        model, rp.job, lambda: train_local(model, _data(320), params, 0, rp.job.plan, rp.adapt)
    )
    log = rp.job.plan_log
    assert isinstance(log, PlanLog) and loss is not None and cost.status == "ok"
    # Steps 1-4 started before 10:00 under the full batch; the 5th sees 4 MB.
    assert log.runs[0] == (FULL, 4) and log.steps == len(sizes) == 10
    small = log.runs[1][0]
    assert small != FULL and log.budgets_mb == [16.0, 4.0]
    assert cost.plan == f"bs32>{small.name(32)}"
    assert cost.extra["plan_switches"] == 1.0 and cost.extra["mem_budget_min_mb"] == 4.0
    # The emulated latency and energy are the sum over the two plans' steps.
    w_small = meter.workloads(net, dataclasses.replace(job, plan=small))[0][0]
    wf = meter.workloads(net, job)[0][0]
    both = emulate(profile, [(wf, 4), (w_small, 6)], meter.start_state(job), Knobs())
    assert cost.latency_s == pytest.approx(both.latency_s)
    assert cost.energy_j == pytest.approx(both.energy_j)
    assert cost.latency_s != pytest.approx(10 * full_step, rel=1e-4)
    # The smaller plan's step is two micro-batches: it pays the per-step overhead and
    # the per-call dispatch per micro-batch (the update's calls once), while each
    # micro-batch's activations stay in cache - so it is not necessarily slower.
    assert small.microbatches == 2

    def one_step(w: Workload) -> Emulation:
        return emulate(profile, [(w, 1)], meter.start_state(job), Knobs())

    full_one, small_one = one_step(wf), one_step(w_small)
    assert small_one.time_s["overhead"] == pytest.approx(2 * full_one.time_s["overhead"])
    assert small_one.time_s["dispatch"] > 1.5 * full_one.time_s["dispatch"]


def test_budget_too_small_mid_round_is_oom_with_the_step(net: torch.nn.Module) -> None:
    profile = _profile(16, [[10, 12, 0.01]])  # 0.16 MB: not even the weights
    meter = EmulatedMeter(profile, Knobs())
    params = TrainParams(batch_size=32, local_epochs=1, lr=0.01, momentum=0.9, weight_decay=5e-4)
    full_step = meter.emulate(net, _job(sizes=(32,))).latency_s
    job = _job(10 * HOUR - 1.5 * full_step, step_sizes(320, 32, 1))
    rp = plan_round(net, job, meter, "auto")
    model = copy.deepcopy(net)
    loss, cost = meter.measure(
        model, rp.job, lambda: train_local(model, _data(320), params, 0, rp.job.plan, rp.adapt)
    )
    assert loss is None and cost.status == "oom"
    assert cost.reason.startswith("memory budget fell to 0.16 MB before step 3: weights")
    assert cost.latency_s > 0  # the two steps done were spent
