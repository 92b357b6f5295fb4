"""Time and energy of one optimizer step at fixed clocks.

Each operator call is timed by `fedbench.devices.kernels` (a per-call
roofline on the CPU or the GPU). On top of the calls a step pays serial
work on the main core that scales with its clock: the framework's per-step
overhead and loading the batch; a user's call's work outside the op
trace (numpy, scikit-learn: its measured CPU time, fedbench.devices.cpu_time);
and, when the process's resident set outgrows what the device keeps
resident, swapping (`memory.py`): the excess is paged out and back in every
step. Background priority stretches
every term by 1 / background_share (the OS gives the process that share of
the CPU). Where the governor drives a cluster of worker threads by their load
(`cpu.load_clocks`), the step is timed at the placed clocks, the cluster
settles by how long the workers slept through the host work, and the step is
timed again at the settled clocks.

A population device (fedbench.population) runs the profile's step at its
drawn `speed` (a slower unit of the same model: silicon bin, cooling, a
process in the background): every time term stretches by 1 / speed at the
profile's power, so every energy term stretches with it. The emulator
integrates these longer steps through the thermal model, so a slow unit
heats for longer and may cross a trip a nominal one never reaches.

Energy is idle power over the whole step, CPU power over each phase (all
training threads busy in the parallel calls, one core in serial work),
GPU busy power while its kernels run, and DRAM energy per byte that misses
the cache. The CPU's and the DRAM's figures are the profile's, times the
shared activity factors fitted to measured whole-device power
(`shared.core_power_scale`, `shared.dram_energy_scale`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from fedbench.core.workload import OP_CLASSES, Workload
from fedbench.devices.constants import Constants, CpuFramework
from fedbench.devices.cpu import (
    Active,
    load_clocks,
    main_thread,
    parallel_power_w,
    serial_power_w,
)
from fedbench.devices.kernels import (
    GB,
    OPTIMIZER,
    CallTable,
    CpuRig,
    GpuRig,
    by_class,
    cpu_call_seconds,
    gpu_call_seconds,
)
from fedbench.devices.lowering import lower_workload
from fedbench.devices.memory import fault_seconds, resident_mb, swap_seconds
from fedbench.devices.profile import DeviceProfile

MB = float(1 << 20)
# Breakdown keys: op classes (their calls' roofline time, forward and
# backward), then the terms outside it.
TIME_TERMS: tuple[str, ...] = (
    *OP_CLASSES,
    "optimizer",  # the update's calls (serial, main core)
    "unfold",  # im2col/col2im traffic of GEMM-based convolutions
    "repack",  # packing/transforming weights per call (once per step, not per sample)
    "dispatch",  # per-call serial work: framework dispatch, kernel launches
    "overhead",  # per-step framework overhead
    "input",  # loading the batch
    "transfer",  # GPU: host<->device copies
    "swap",  # paging the resident set's excess out and in
    "fault",  # faulting in the memory a step allocates afresh
    "measured",  # work outside the op trace, from the call's CPU time (devices.cpu_time)
)
ENERGY_TERMS: tuple[str, ...] = ("idle", "cpu", "gpu", "memory")


@dataclass(frozen=True)
class StepCost:
    seconds: float
    time_s: Mapping[str, float]  # per TIME_TERMS
    energy_j: Mapping[str, float]  # per ENERGY_TERMS
    freq_ghz: float  # thread-weighted clock of the active cores
    busy_cores: float  # time-averaged cores kept busy by this process
    dram_gb: float  # DRAM traffic of the step
    gpu_busy_s: float = 0.0  # seconds the GPU runs kernels (its utilisation x seconds)

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())

    @property
    def active_power_w(self) -> float:
        """Power above idle: what heats the device."""
        return (self.total_energy_j - self.energy_j["idle"]) / self.seconds if self.seconds else 0.0


def cpu_rig(profile: DeviceProfile, active: tuple[Active, ...], consts: Constants) -> CpuRig:
    main = main_thread(active, consts)
    return CpuRig(
        threads=float(sum(a.threads for a in active)),
        core_gflops=min(consts.core_peak_gflops(a.cluster.arch, a.freq_ghz) for a in active),
        main_ghz=main.freq_ghz * consts.core_ipc_scale(main.cluster.arch),
        dram_gbs=profile.memory.bandwidth_gbs,
        cache_bytes=profile.memory.cache_mb * MB,
        dispatch_scale=profile.framework.dispatch_scale,
        gemm_scale=profile.framework.kernel_scale.gemm,
        depthwise_scale=profile.framework.kernel_scale.depthwise,
        elementwise_scale=profile.framework.kernel_scale.elementwise,
        pool_scale=profile.framework.kernel_scale.pool,
        norm_scale=profile.framework.kernel_scale.norm,
        cache_scale=profile.framework.kernel_scale.cache,
        unfold_scale=profile.framework.kernel_scale.unfold,
    )


def serial_seconds(
    fw: CpuFramework, workload: Workload, main_ghz: float, dispatch_scale: float = 1.0
) -> tuple[float, float]:
    """The step's framework overhead and input loading, serial on the main core.

    The per-step overhead is host-side framework work like the per-call
    dispatch (the optimizer loop, autograd's setup), so the profile's
    `framework.dispatch_scale` - this build's framework cost relative to the
    fitted one - scales both.
    """
    hz = main_ghz * GB
    # 0: work outside any optimizer step (fedbench.devices.cpu_time): no step's overhead.
    micro = workload.steps_per_update
    return (
        fw.step_overhead_mcycles * 1e6 * micro * dispatch_scale / hz,
        workload.input_bytes * fw.input_cycles_per_byte / hz,
    )


# The terms every training thread works through, and those the main thread runs alone.
_PARALLEL: tuple[str, ...] = (*OP_CLASSES, "unfold", "repack")
_SERIAL: tuple[str, ...] = (
    "optimizer",
    "dispatch",
    "overhead",
    "input",
    "swap",
    "fault",
    "measured",
)


def _parallel_s(times: Mapping[str, float]) -> float:
    return sum(times[k] for k in _PARALLEL)


def _serial_s(times: Mapping[str, float]) -> float:
    return sum(times[k] for k in _SERIAL)


# The serial terms the worker threads sleep through: the framework's host work
# between the backend's executions (building and dispatching the graph, loading
# the batch). Faults and swapping happen where memory is first touched, inside
# an execution, and the update runs on the backend: the workers spin through
# those, so a load-driven governor counts them as busy.
# Work measured outside the trace (numpy, scikit-learn) is taken as the main thread's
# alone, like the framework's host work.
_HOST: tuple[str, ...] = ("dispatch", "overhead", "input", "measured")


def _host_s(times: Mapping[str, float]) -> float:
    return sum(times[k] for k in _HOST)


def _cpu_times(
    profile: DeviceProfile,
    workload: Workload,
    table: CallTable,
    active: tuple[Active, ...],
    consts: Constants,
    fw: CpuFramework,
) -> tuple[CpuRig, dict[str, float]]:
    """The rig and the step's TIME_TERMS with the threads at `active`."""
    rig = cpu_rig(profile, active, consts)
    calls = cpu_call_seconds(table, rig, fw, consts.fitted.shared)
    times = dict.fromkeys(TIME_TERMS, 0.0)
    times.update(by_class(table, calls.roofline))
    update = table.phase == OPTIMIZER
    times["optimizer"] = float(calls.roofline[update].sum())
    times["unfold"] = float(calls.unfold.sum())
    times["repack"] = float(calls.repack.sum())
    times["dispatch"] = float(calls.dispatch.sum())
    times["overhead"], times["input"] = serial_seconds(
        fw, workload, float(rig.main_ghz), float(rig.dispatch_scale)
    )
    times["measured"] = workload.measured_cycles / (float(rig.main_ghz) * GB)
    rss = resident_mb(workload, fw)
    times["swap"] = swap_seconds(profile, rss, consts.fitted.shared)
    times["fault"] = fault_seconds(rss, fw, float(rig.main_ghz))
    return rig, times


def step_cost(
    profile: DeviceProfile,
    workload: Workload,
    active: tuple[Active, ...],
    consts: Constants,
    framework: str,
    background: bool,
    processor: str = "cpu",
    speed: float = 1.0,
) -> StepCost:
    """One step of `workload` with the training threads placed as `active`, on a unit
    running at `speed` x the profile's throughput (module docstring)."""
    if processor == "gpu":
        return slowed(_gpu_step(profile, workload, active, consts, framework, background), speed)
    fw = consts.framework(framework)
    table = lower_workload(workload, framework, profile.framework.conv_backend)
    main = main_thread(active, consts)
    rig, times = _cpu_times(profile, workload, table, active, consts, fw)
    host = _host_s(times)
    settled = load_clocks(active, main, _parallel_s(times) + _serial_s(times) - host, host)
    if settled != active:  # a governed worker cluster idles down (cpu.load_clocks)
        active = settled
        rig, times = _cpu_times(profile, workload, table, active, consts, fw)
    parallel_s, serial_s = _parallel_s(times), _serial_s(times)
    share = profile.os.background_share if background else 1.0
    seconds = (parallel_s + serial_s) / share
    shared = consts.fitted.shared
    fits = shared.cache_share * rig.cache_bytes
    dram = float(np.maximum(0.0, table.bytes - fits).sum() + table.unfold.sum())
    cpu_j = parallel_power_w(profile, active) * parallel_s
    cpu_j += serial_power_w(profile, main) * serial_s
    energy = {
        "idle": profile.power.idle_w * seconds,
        "cpu": shared.core_power_scale * cpu_j,
        "gpu": 0.0,
        "memory": shared.dram_energy_scale * profile.power.mem_w_per_gbs * dram / GB,
    }
    threads = rig.threads
    foreground = parallel_s + serial_s
    busy = (float(threads) * parallel_s + serial_s) / foreground * share if foreground else 0.0
    freq = sum(a.freq_ghz * a.threads for a in active) / float(threads)
    cost = StepCost(
        seconds=seconds,
        time_s={k: v / share for k, v in times.items()},
        energy_j=energy,
        freq_ghz=freq,
        busy_cores=busy,
        dram_gb=dram / GB,
    )
    return slowed(cost, speed)


def slowed(cost: StepCost, speed: float) -> StepCost:
    """The step on a unit `speed` x as fast: the same work over 1 / speed the time, at the
    same power (clock, busy cores and DRAM traffic are the step's own)."""
    if speed == 1.0:
        return cost
    return replace(
        cost,
        seconds=cost.seconds / speed,
        time_s={k: v / speed for k, v in cost.time_s.items()},
        energy_j={k: v / speed for k, v in cost.energy_j.items()},
        gpu_busy_s=cost.gpu_busy_s / speed,
    )


def gpu_rig(profile: DeviceProfile, active: tuple[Active, ...], consts: Constants) -> GpuRig:
    gpu = profile.gpu
    assert gpu is not None  # emulate() refuses knobs.device=gpu without one
    main = main_thread(active, consts)
    return GpuRig(
        lanes=float(gpu.lanes),
        peak_gflops=gpu.peak_gflops,
        dram_gbs=profile.memory.bandwidth_gbs,
        copy_gbs=gpu.copy_gbs,
        host_ghz=main.freq_ghz * consts.core_ipc_scale(main.cluster.arch),
    )


def _gpu_step(
    profile: DeviceProfile,
    workload: Workload,
    active: tuple[Active, ...],
    consts: Constants,
    framework: str,
    background: bool,
) -> StepCost:
    gpu = profile.gpu
    assert gpu is not None
    fw = consts.gpu_framework(framework)
    table = lower_workload(workload, framework, profile.framework.conv_backend)
    rig = gpu_rig(profile, active, consts)
    calls = gpu_call_seconds(table, rig, fw)
    main = main_thread(active, consts)
    shared = consts.fitted.shared
    times = dict.fromkeys(TIME_TERMS, 0.0)
    times.update(by_class(table, calls.device))  # the kernels, launches included
    update = table.phase == OPTIMIZER
    times["optimizer"] = float(calls.device[update].sum())
    # Host work the GPU's queue did not hide, and waiting for the GPU per call.
    times["dispatch"] = float((calls.exposed_dispatch + calls.sync).sum())
    times["transfer"] = float(calls.transfer.sum())
    times["input"] = workload.input_bytes / GB / gpu.copy_gbs
    times["measured"] = float(workload.measured_cycles / (rig.host_ghz * GB))  # on the CPU
    times["swap"] = swap_seconds(profile, resident_mb(workload, fw), shared)
    share = profile.os.background_share if background else 1.0
    busy_gpu = float(calls.device.sum())
    host_s = float(calls.dispatch.sum()) + times["transfer"] + times["input"] + times["swap"]
    host_s += times["measured"]
    seconds = sum(times.values()) / share
    moved = float(table.bytes.sum()) + 2.0 * float((fw.transfer_fraction * table.bytes).sum())
    energy = {
        "idle": profile.power.idle_w * seconds,
        "cpu": shared.core_power_scale * serial_power_w(profile, main) * host_s,
        "gpu": gpu.busy_power_w * busy_gpu,
        "memory": shared.dram_energy_scale * profile.power.mem_w_per_gbs * moved / GB,
    }
    return StepCost(
        seconds=seconds,
        time_s={k: v / share for k, v in times.items()},
        energy_j=energy,
        freq_ghz=main.freq_ghz,
        busy_cores=min(1.0, host_s / seconds * share) if seconds else 0.0,
        dram_gb=moved / GB,
        gpu_busy_s=busy_gpu / share,
    )
