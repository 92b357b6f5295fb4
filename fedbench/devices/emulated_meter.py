"""The meter of an emulated device: real training on the host, cost from the profile.

For each round it measures the workload of the model at every batch size
the job will step with, under the job's memory plan (FLOPs, bytes, memory
terms; cached), lets the device cool from its last known state to the
round's start, and emulates the steps on the profile against the budget at
that time (fedbench.devices.budget: memory pressure). Only if the emulator
says the plan fits (status ok) does it run the real training; if the loop
re-planned mid-round, the steps are costed with the plans that ran them.
Every figure is virtual and deterministic; the host's wall clock never
enters the Cost.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from fedbench.core.device import DeviceState, Traits
from fedbench.core.meter import Caps, Ceilings, Cost, Meter, TrainJob, Watch, WatchJob
from fedbench.core.plans import Plan
from fedbench.core.workload import Workload
from fedbench.devices.budget import RoundClock, Run, budget_at, step_runs, with_budget
from fedbench.devices.constants import load_constants
from fedbench.devices.cpu import place
from fedbench.devices.cpu_time import Measured, with_cpu_time
from fedbench.devices.emulator import Emulation, emulate, framework_constants, framework_of
from fedbench.devices.knobs import Knobs
from fedbench.devices.memory import excess_mb, resident_mb
from fedbench.devices.network import comm_time_s
from fedbench.devices.profile import DeviceProfile, initial_state
from fedbench.devices.step import step_cost
from fedbench.devices.thermal import cool
from fedbench.devices.variation import comm_energy_j, varied_profile
from fedbench.measure.live import LiveRecorder, warm
from fedbench.measure.usage import UsageWatch, serial_blas
from fedbench.measure.workload import measure_workload


class EmulatedMeter(Meter):
    kind = "emulated"
    # The profile's own unit: its nominal throughput, and no radio model (the
    # profile's network costs time only). A population device overrides both.
    speed = 1.0

    def radio_j(self, model_bytes: int) -> float:
        """The radio's energy for the round's transfers, drawn from the battery with training."""
        return 0.0

    def __init__(
        self, profile: DeviceProfile, knobs: Knobs, optimizer: str = "sgd_momentum"
    ) -> None:
        self.profile = profile
        self.knobs = knobs
        # The workload's optimizer term and state bytes; the training loop
        # uses SGD with momentum.
        self.optimizer = optimizer
        consts = load_constants()
        place(profile, knobs, consts, None)  # refuse bad knobs now, not mid-run
        framework_of(profile, knobs, consts)

    @classmethod
    def from_config(
        cls, profile: DeviceProfile, knobs: Mapping[str, Any], optimizer: str = "sgd_momentum"
    ) -> EmulatedMeter:
        return cls(profile, Knobs.from_mapping(knobs, "fleet.knobs"), optimizer)

    def predict(self, model: nn.Module, job: TrainJob) -> Cost:
        """The job's emulated cost under its plan, from the device's state at its start."""
        return self.cost_of(self.emulate(model, job), job, job.plan_label)

    def caps(self, now_s: float | None = None) -> Caps:
        """The cores it trains on (its framework's threads, or fleet.knobs.cores) and its
        training budget at `now_s`.

        Without a time, the profile's budget: a process that lives the whole run
        is held to the budget the device has without memory pressure.
        """
        memory = self.profile.memory.train_budget_mb if now_s is None else self.budget_mb_at(now_s)
        return Caps(self.knobs.cores or self.profile.framework.threads, memory)

    def budget_mb_at(self, now_s: float) -> float:
        """Memory the device leaves to training at virtual time `now_s` (memory.pressure)."""
        return budget_at(self.profile, now_s)

    def ceilings(self) -> Ceilings:
        p = self.profile
        busy = (
            p.power.idle_w
            + sum(c.cores * c.core_power_w + c.cluster_power_w for c in p.clusters)
            + p.power.mem_w_per_gbs * p.memory.bandwidth_gbs
        )
        return Ceilings(
            power_w=busy,
            memory_mb=float(p.memory.total_mb),
            freq_ghz=max(c.max_freq_ghz for c in p.clusters),
        )

    def varied(self, traits: Traits) -> VariedMeter:
        return VariedMeter(self, traits)

    def budget_mb(self, job: TrainJob) -> float:
        """Memory the device leaves to training at the job's start (memory.pressure applied)."""
        return self.budget_mb_at(job.now_s)

    def budget_fn(self, model: nn.Module, job: TrainJob) -> Callable[[int], float] | None:
        """With a pressure pattern: the budget at each step's virtual time (budget.RoundClock)."""
        if not self.profile.memory.pressure or job.plan_log is None:
            return None

        def advance(runs: list[Run], state: DeviceState) -> DeviceState:
            ran = self.run(self.profile, self._costed(model, job, runs), state, job.model_bytes)
            return ran.state if ran.status == "ok" else state

        return RoundClock(self.profile, job, self.start_state(job), advance)

    def time_fn(self) -> Callable[[Workload], float]:
        return self.step_seconds

    def holds_fn(self) -> Callable[[Workload], bool]:
        return self.holds

    def holds(self, workload: Workload) -> bool:
        """Whether the step's resident set stays in the profile's RAM (no paging every step).

        The planner prefers such a plan; when none is, it falls back to the
        least-memory plan, which the emulator then runs with swapping, or `oom`.
        """
        return excess_mb(self.profile, self.resident(workload)) <= 0.0

    def resident_fn(self) -> Callable[[Workload], float]:
        return self.resident

    def resident(self, workload: Workload) -> float:
        """The training process's peak resident set here, MB (fedbench.devices.memory)."""
        fw = framework_constants(self.profile, self.knobs, load_constants())
        return resident_mb(workload, fw)

    def step_seconds(self, workload: Workload) -> float:
        """One unthrottled optimizer step of `workload` here: a memory planner's time_fn."""
        consts = load_constants()
        active = place(self.profile, self.knobs, consts, None)
        framework = framework_of(self.profile, self.knobs, consts)
        return step_cost(
            self.profile,
            workload,
            active,
            consts,
            framework,
            self.knobs.background,
            self.knobs.device,
            self.speed,
        ).seconds

    def start_state(self, job: TrainJob) -> DeviceState:
        """The device at the round's start: its last state cooled while idle until now."""
        state = job.state if job.state is not None else initial_state(self.profile, job.now_s)
        return cool(self.profile, state, job.now_s)

    def workloads(self, model: nn.Module, job: TrainJob) -> list[tuple[Workload, int]]:
        """The job's steps as (workload of its plan and batch size, steps), in order."""
        log = job.plan_log
        if log is not None and log.runs:  # what the loop ran, plan switches included
            return self._costed(model, job, step_runs(job, 0, log.steps))
        counts = Counter(job.batch_sizes)  # insertion order: full batches, then the remainder
        return self._costed(model, job, [(job.plan, bs, n) for bs, n in counts.items()])

    def _costed(
        self, model: nn.Module, job: TrainJob, runs: list[Run]
    ) -> list[tuple[Workload, int]]:
        out = []
        for plan, bs, n in runs:
            # A short last step keeps the plan's micro-batch size (Plan.microbatches_for).
            step_plan = Plan(
                plan.microbatches_for(max(job.batch_sizes), bs), plan.checkpoint_segments
            )
            w = measure_workload(
                model,
                job.input_shape,
                bs,
                model_name=job.model_name,
                optimizer=self.optimizer,
                plan=step_plan.name(bs),
                checkpoint_segments=step_plan.checkpoint_segments,
                microbatches=step_plan.microbatches,
                input_dtype=job.input_dtype,
                input_high=job.input_high,
            )
            out.append((w, n))
        return out

    def emulate(self, model: nn.Module, job: TrainJob, budget_mb: float | None = None) -> Emulation:
        budget = self.budget_mb(job) if budget_mb is None else budget_mb
        return self.run(
            with_budget(self.profile, budget),
            self.workloads(model, job),
            self.start_state(job),
            job.model_bytes,
        )

    def run(
        self,
        profile: DeviceProfile,
        workloads: list[tuple[Workload, int]],
        state: DeviceState,
        model_bytes: int,
    ) -> Emulation:
        """The emulator on this unit: its speed, and its radio drawing on its battery."""
        return emulate(
            profile,
            workloads,
            state,
            self.knobs,
            speed=self.speed,
            radio_j=self.radio_j(model_bytes),
        )

    def cost_of(self, emulation: Emulation, job: TrainJob | WatchJob, plan: str) -> Cost:
        """The emulation as the round's Cost, with the model's transfers over the link."""
        return emulation.to_cost(comm_time_s(self.profile, job.model_bytes), plan)

    def watch(self, job: WatchJob) -> EmulatedWatch:
        """Cost whatever the surrounded call trains: its aten ops, emulated on the profile."""
        return EmulatedWatch(self, job)

    def measure(
        self, model: nn.Module, job: TrainJob, train: Callable[[], float]
    ) -> tuple[float | None, Cost]:
        emulation = self.emulate(model, job)
        if emulation.status != "ok":
            return None, self.cost_of(emulation, job, job.plan_label)
        loss = train()
        log = job.plan_log
        if log is None or not log.runs:
            return loss, self.cost_of(emulation, job, job.plan_label)
        # The loop re-planned: cost the steps it ran, each with its plan; every
        # plan fitted the budget of its steps, the largest of which is reported.
        emulation = self.emulate(model, job, max([self.budget_mb(job), *log.budgets_mb]))
        cost = self.cost_of(emulation, job, job.plan_label)
        if cost.status != "ok":  # the steps it ran cost more than the battery held
            return None, cost
        cost.extra["plan_switches"] = float(len(log.runs) - 1)
        cost.extra["mem_budget_min_mb"] = min([self.budget_mb(job), *log.budgets_mb])
        if log.stopped:
            return None, dataclasses.replace(cost, status="oom", reason=log.stopped)
        return loss, cost


class EmulatedWatch(Watch):
    """A user's train handler on an emulated device.

    The handler runs for real under a LiveRecorder; its measured workload
    (per step, over the backward passes it ran) is then emulated on the
    profile from the device's state, against the training budget at the
    start. Over budget, the device ran out of memory: status `oom` - the
    training happened on the host, but the device could not have done it.
    The call's process CPU time and memory are measured too: work it ran
    outside torch (scikit-learn, numpy) is costed from them
    (fedbench.devices.cpu_time), and the Cost's basis says which.
    """

    def __init__(self, meter: EmulatedMeter, job: WatchJob) -> None:
        self.meter = meter
        self.job = job
        self.recorder = LiveRecorder()
        self.usage = UsageWatch()

    def __enter__(self) -> EmulatedWatch:
        warm()  # torch's one-time import is the host's, not the call's
        self.serial = serial_blas()
        self.serial.__enter__()  # CPU time of the work, not of spinning BLAS helpers
        self.usage.__enter__()
        self.recorder.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.recorder.__exit__(None, None, None)
        self.usage.__exit__(None, None, None)
        self.serial.__exit__(None, None, None)

    def cost(self) -> Cost:
        job, meter = self.job, self.meter
        workload, steps = self.recorder.workload(job.model_name, job.model_bytes)
        state = meter.start_state(
            TrainJob(job.model_name, (), (), job.model_bytes, job.now_s, job.state)
        )
        profile = with_budget(meter.profile, budget_at(meter.profile, job.now_s))

        def run(workloads: list[tuple[Workload, int]]) -> Emulation:
            return meter.run(profile, workloads, state, job.model_bytes)

        measured = self.measured()
        device = (profile, meter.knobs, meter.speed)
        ops = run([(workload, steps)])
        emulation, basis = with_cpu_time(ops, (workload, steps), measured, device, run)
        cost = meter.cost_of(emulation, job, f"app:{steps}steps")
        cost.extra["host_cpu_outside_ops_s"] = measured.outside_cpu_s
        return dataclasses.replace(cost, cost_basis=basis)

    def measured(self) -> Measured:
        """What the host measured about the call: its CPU time outside torch, its memory."""
        usage = self.usage.usage
        growth = usage.growth_mb if usage is not None else math.nan
        recorder = self.recorder
        # A call without torch is one stretch outside it, however short.
        outside = recorder.outside_cpu_s if recorder.ran_ops else recorder.call_cpu_s
        return Measured(outside, growth, recorder.ran_ops)


class VariedMeter(EmulatedMeter):
    """An EmulatedMeter for one population device: the emulator runs on its own unit.

    Its profile carries the device's own link and battery capacity, its steps
    run at the device's speed, and its radio (LTE or Wi-Fi power model) draws
    on the same battery as training (fedbench.devices.variation). Every Cost
    it makes - predict, measure, watch - is that one emulation's.
    """

    def __init__(self, meter: EmulatedMeter, traits: Traits) -> None:
        super().__init__(varied_profile(meter.profile, traits), meter.knobs, meter.optimizer)
        self.traits = traits
        self.speed = traits.speed

    def radio_j(self, model_bytes: int) -> float:
        return comm_energy_j(self.traits, model_bytes)

    def cost_of(self, emulation: Emulation, job: TrainJob | WatchJob, plan: str) -> Cost:
        cost = super().cost_of(emulation, job, plan)
        state = job.state or initial_state(self.profile, job.now_s)
        start = state.battery_pct if self.traits.has_battery else math.nan
        cost.extra["comm_energy_j"] = self.radio_j(job.model_bytes)
        cost.extra["battery_pct_start"] = start
        return cost
