"""The device emulator: what a sequence of training steps costs on a profiled device.

`emulate` is a pure function of the profile, the measured workloads, the
device's state and the knobs - no wall clock, no host measurement - so the
same experiment gives the same figures on any machine. It checks memory
twice: the peak of the workload's tensor terms against the profile's
training budget (what the memory planner plans for), and the process's
peak resident set against what the device can hold resident plus swap
(`fedbench.devices.memory`); either over is `oom` and nothing runs (a
resident set between the two swaps, which the step cost charges). Then it
integrates the steps through the thermal model (step costs from
`fedbench.devices.step` at each throttle level's clocks, on the CPU or,
with `knobs.device=gpu`, the profile's GPU) and drains the battery by the
energy used.

A population device is emulated as itself, not scaled afterwards: its
profile carries its own link and battery (fedbench.devices.variation.
varied_profile), `speed` stretches its steps before the thermal model
sees them (fedbench.devices.step.slowed), and `radio_j` - its radio's
energy for the round's transfers - drains the same battery as training.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fedbench.core.device import DeviceState
from fedbench.core.meter import Cost
from fedbench.core.workload import Workload
from fedbench.devices.constants import Constants, CpuFramework, GpuFramework, load_constants
from fedbench.devices.cpu import place
from fedbench.devices.knobs import Knobs
from fedbench.devices.memory import excess_mb, resident_mb
from fedbench.devices.profile import DeviceProfile
from fedbench.devices.step import ENERGY_TERMS, TIME_TERMS, StepCost, step_cost
from fedbench.devices.thermal import cap_at, integrate
from fedbench.errors import FedbenchError, choices

MB = float(1 << 20)
MEMORY_TERMS: tuple[str, ...] = (
    "params",
    "grads",
    "optimizer_state",
    "saved_activations",
    "workspace",
    "input",
)


@dataclass(frozen=True)
class Emulation:
    status: str  # ok | oom | dropped
    reason: str
    steps: int
    latency_s: float
    energy_j: float
    avg_power_w: float
    peak_mem_mb: float
    mem_budget_mb: float
    temp_c_start: float
    temp_c_end: float
    freq_ghz_avg: float
    throttled_frac: float
    battery_pct: float
    busy_cores: float  # time-averaged cores this process kept busy
    time_s: Mapping[str, float]  # per op class / optimizer / overhead / input
    energy_terms_j: Mapping[str, float]  # idle, cpu, memory
    memory_mb: Mapping[str, float]  # the terms of the peak
    state: DeviceState
    rss_mb: float = math.nan  # peak resident set of the process (runtime + tensors)
    swapped_mb: float = 0.0  # resident set beyond what the device keeps resident
    processor: str = "cpu"
    gpu_busy_frac: float = 0.0  # share of the time the GPU runs kernels (tegrastats' GR3D)

    def to_cost(self, comm_s: float, plan: str, basis: str = "ops") -> Cost:
        """The emulation as a Cost; `basis`: what its work was measured as (records.COST_BASES)."""
        extra = {f"time_{k}_s": v for k, v in self.time_s.items()}
        extra |= {f"energy_{k}_j": v for k, v in self.energy_terms_j.items()}
        extra |= {f"mem_{k}_mb": v for k, v in self.memory_mb.items()}
        extra["busy_cores"] = self.busy_cores
        extra["rss_mb"] = self.rss_mb
        extra["swapped_mb"] = self.swapped_mb
        return Cost(
            status=self.status,
            reason=self.reason,
            latency_s=self.latency_s,
            comm_s=comm_s,
            energy_j=self.energy_j,
            avg_power_w=self.avg_power_w,
            peak_mem_mb=self.peak_mem_mb,
            mem_budget_mb=self.mem_budget_mb,
            plan=plan,
            temp_c_start=self.temp_c_start,
            temp_c_end=self.temp_c_end,
            freq_ghz_avg=self.freq_ghz_avg,
            throttled_frac=self.throttled_frac,
            battery_pct=self.battery_pct,
            cost_basis=basis,
            state_after=self.state,
            extra=extra,
        )


def memory_terms(w: Workload) -> dict[str, float]:
    values = (
        w.param_bytes,
        w.grad_bytes,
        w.optimizer_state_bytes,
        w.saved_activation_bytes,
        w.workspace_bytes,
        w.input_bytes,
    )
    return {k: v / MB for k, v in zip(MEMORY_TERMS, values, strict=True)}


def framework_constants(
    profile: DeviceProfile, knobs: Knobs, consts: Constants
) -> CpuFramework | GpuFramework:
    """The constants of the software stack this device trains with under these knobs."""
    framework = framework_of(profile, knobs, consts)
    return consts.gpu_framework(framework) if knobs.device == "gpu" else consts.framework(framework)


def emulate(
    profile: DeviceProfile,
    workloads: Sequence[tuple[Workload, int]],
    state: DeviceState,
    knobs: Knobs,
    consts: Constants | None = None,
    speed: float = 1.0,
    radio_j: float = 0.0,
) -> Emulation:
    """Cost `count` steps of each workload, in order, starting from `state`, on a unit
    `speed` x the profile's throughput whose radio spends `radio_j` on the round."""
    consts = consts or load_constants()
    framework = framework_of(profile, knobs, consts)
    place(profile, knobs, consts, None)  # bad knobs fail here, before any work
    budget = float(profile.memory.train_budget_mb)
    steps = sum(n for _, n in workloads)
    peak_w = max((w for w, _ in workloads), key=lambda w: w.peak_bytes, default=None)
    memory = memory_terms(peak_w) if peak_w is not None else dict.fromkeys(MEMORY_TERMS, 0.0)
    peak = sum(memory.values())
    fw_consts = framework_constants(profile, knobs, consts)
    rss = resident_mb(peak_w, fw_consts) if peak_w is not None else 0.0
    swapped = excess_mb(profile, rss)
    if peak > budget:
        return _not_run(
            profile,
            state,
            steps,
            "oom",
            f"peak {peak:.0f} MB > training budget {budget:.0f} MB of {profile.name}",
            memory,
            budget,
            rss,
            swapped,
        )
    if swapped > profile.memory.swap_mb:
        mem = profile.memory
        return _not_run(
            profile,
            state,
            steps,
            "oom",
            f"resident set {rss:.0f} MB > {mem.resident_mb} MB resident + {mem.swap_mb} MB swap "
            f"of {profile.name}",
            memory,
            budget,
            rss,
            swapped,
        )

    time_s = dict.fromkeys(TIME_TERMS, 0.0)
    energy = dict.fromkeys(ENERGY_TERMS, 0.0)
    total_s = freq_s = throttled_s = busy_s = gpu_s = 0.0
    temp = state.temp_c
    for w, count in workloads:
        at = _LevelCosts(profile, w, knobs, consts, framework, speed)
        segments = integrate(profile, temp, float(count), at.thermal)
        for seg in segments:
            cost = at(seg.level)
            for k in TIME_TERMS:
                time_s[k] += cost.time_s[k] * seg.steps
            for k in ENERGY_TERMS:
                energy[k] += cost.energy_j[k] * seg.steps
            total_s += seg.seconds
            freq_s += cost.freq_ghz * seg.seconds
            busy_s += cost.busy_cores * seg.seconds
            gpu_s += cost.gpu_busy_s * seg.steps
            throttled_s += seg.seconds if seg.level > 0 else 0.0
            temp = seg.temp_end_c

    energy_j = sum(energy.values())
    battery = state.battery_pct
    capacity = profile.battery.capacity_wh
    if capacity is not None:
        drawn = energy_j + radio_j
        battery = state.battery_pct - 100.0 * drawn / (capacity * 3600.0)
        if battery < 0.0:
            return _not_run(
                profile,
                state,
                steps,
                "dropped",
                f"battery at {state.battery_pct:.1f}% cannot supply {drawn:.0f} J",
                memory,
                budget,
                rss,
                swapped,
            )
    return Emulation(
        status="ok",
        reason="",
        steps=steps,
        latency_s=total_s,
        energy_j=energy_j,
        avg_power_w=energy_j / total_s if total_s else 0.0,
        peak_mem_mb=peak,
        mem_budget_mb=budget,
        temp_c_start=state.temp_c,
        temp_c_end=temp,
        freq_ghz_avg=freq_s / total_s if total_s else math.nan,
        throttled_frac=throttled_s / total_s if total_s else 0.0,
        battery_pct=battery,
        busy_cores=busy_s / total_s if total_s else 0.0,
        time_s=time_s,
        energy_terms_j=energy,
        memory_mb=memory,
        state=DeviceState(temp_c=temp, battery_pct=battery, time_s=state.time_s + total_s),
        rss_mb=rss,
        swapped_mb=swapped,
        processor=knobs.device,
        gpu_busy_frac=gpu_s / total_s if total_s else 0.0,
    )


def framework_of(profile: DeviceProfile, knobs: Knobs, consts: Constants) -> str:
    """The software stack that trains: the knob's, else the profile's (for the processor).

    Refuses a GPU on a profile without one, and a framework without
    constants for the processor, naming what is valid.
    """
    if knobs.device == "gpu":
        if profile.gpu is None:
            raise FedbenchError(
                f"knobs.device=gpu: profile {profile.name} has no GPU; valid: cpu "
                f"(profiles with a GPU: {choices(_gpu_profiles())})"
            )
        name = knobs.framework or profile.gpu.framework
        consts.gpu_framework(name)
        return name
    name = knobs.framework or profile.framework.name
    consts.framework(name)
    return name


def _gpu_profiles() -> list[str]:
    from fedbench.devices.profile import load_profile, profile_names

    return [n for n in profile_names() if load_profile(n).gpu is not None]


class _LevelCosts:
    """Step cost of one workload at each throttle level, computed once per level."""

    def __init__(
        self,
        profile: DeviceProfile,
        w: Workload,
        knobs: Knobs,
        consts: Constants,
        framework: str,
        speed: float,
    ) -> None:
        self.profile, self.w, self.knobs, self.consts = profile, w, knobs, consts
        self.framework, self.speed = framework, speed
        self.cache: dict[int, StepCost] = {}

    def __call__(self, level: int) -> StepCost:
        if level not in self.cache:
            active = place(self.profile, self.knobs, self.consts, cap_at(self.profile, level))
            self.cache[level] = step_cost(
                self.profile,
                self.w,
                active,
                self.consts,
                self.framework,
                self.knobs.background,
                self.knobs.device,
                self.speed,
            )
        return self.cache[level]

    def thermal(self, level: int) -> tuple[float, float]:
        cost = self(level)
        return cost.seconds, cost.active_power_w


def _not_run(
    profile: DeviceProfile,
    state: DeviceState,
    steps: int,
    status: str,
    reason: str,
    memory: Mapping[str, float],
    budget: float,
    rss: float,
    swapped: float,
) -> Emulation:
    nan = math.nan
    return Emulation(
        status=status,
        reason=reason,
        steps=steps,
        latency_s=nan,
        energy_j=nan,
        avg_power_w=nan,
        peak_mem_mb=sum(memory.values()),
        mem_budget_mb=budget,
        temp_c_start=state.temp_c,
        temp_c_end=state.temp_c,
        freq_ghz_avg=nan,
        throttled_frac=nan,
        battery_pct=state.battery_pct,
        busy_cores=0.0,
        time_s=dict.fromkeys(TIME_TERMS, 0.0),
        energy_terms_j=dict.fromkeys(ENERGY_TERMS, 0.0),
        memory_mb=dict(memory),
        state=state,
        rss_mb=rss,
        swapped_mb=swapped,
    )
