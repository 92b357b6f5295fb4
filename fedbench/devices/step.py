"""Time and energy of one optimizer step at fixed clocks: the roofline cost model.

Per op class c and pass (forward, backward):

    t = max(flops / (n_eff x peak_core x compute_eff[c] x speed),
            bytes / (mem_bw x bandwidth_eff[c] x speed))

where peak_core is the slowest active core's peak (threads split work
evenly, so the slowest core sets the pace), n_eff = 1 + (n - 1) W / (W + W_half)
is how many of the n threads the pass's work W keeps useful, and `speed` is
the framework's kernel quality. The optimizer update is one more roofline
term, run serially on the main thread like the per-pass framework overhead
and the input pipeline (those two scale with the main core's clock). Background priority stretches
every term by 1 / background_share (the OS gives the process that share of
the CPU). Energy is idle power over the whole step, CPU power over each
phase (all threads busy in parallel phases, one core in serial ones) and
DRAM energy per byte moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fedbench.devices.constants import ClassEfficiency, Constants
from fedbench.devices.cpu import Active, parallel_power_w, serial_power_w
from fedbench.devices.profile import DeviceProfile
from fedbench.measure.workload import OP_CLASSES, OpCost, Workload

GB = 1e9
# Breakdown keys: op classes, then the non-roofline terms.
TIME_TERMS: tuple[str, ...] = (*OP_CLASSES, "optimizer", "overhead", "input")
ENERGY_TERMS: tuple[str, ...] = ("idle", "cpu", "memory")


@dataclass(frozen=True)
class StepCost:
    seconds: float
    time_s: Mapping[str, float]  # per TIME_TERMS
    energy_j: Mapping[str, float]  # per ENERGY_TERMS
    freq_ghz: float  # thread-weighted clock of the active cores
    busy_cores: float  # time-averaged cores kept busy by this process
    dram_gb: float  # DRAM traffic of the step

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())

    @property
    def active_power_w(self) -> float:
        """Power above idle: what heats the device."""
        return (self.total_energy_j - self.energy_j["idle"]) / self.seconds if self.seconds else 0.0


def _roofline(
    cost: OpCost,
    eff: ClassEfficiency,
    core_gflops: float,
    threads: int,
    half_gflop: float,
    micro: int,
    bw_gbs: float,
    speed: float,
) -> float:
    if cost.flops <= 0 and cost.bytes <= 0:
        return 0.0
    work = cost.flops / GB / micro  # per micro-batch pass: what one kernel launch splits
    useful = 1.0 + (threads - 1) * work / (work + half_gflop)
    compute = cost.flops / GB / (useful * core_gflops * eff.compute_eff * speed)
    memory = cost.bytes / GB / (bw_gbs * eff.bandwidth_eff * speed)
    return max(compute, memory)


def step_cost(
    profile: DeviceProfile,
    workload: Workload,
    active: tuple[Active, ...],
    consts: Constants,
    framework: str,
    background: bool,
) -> StepCost:
    fw = consts.framework(framework)
    fitted = consts.fitted
    threads = sum(a.threads for a in active)
    slowest = min(consts.core_peak_gflops(a.cluster.arch, a.freq_ghz) for a in active)
    main = max(active, key=lambda a: consts.core_peak_gflops(a.cluster.arch, a.freq_ghz))
    micro = max(1, workload.steps_per_update)
    bw = profile.memory.bandwidth_gbs
    half = fitted.parallel_half_work_gflop

    times = dict.fromkeys(TIME_TERMS, 0.0)
    traffic = 0.0
    for costs in (workload.forward, workload.backward):
        for cls in OP_CLASSES:
            cost = costs.get(cls)
            if cost is None:
                continue
            eff = fitted.op_class[cls]
            times[cls] += _roofline(cost, eff, slowest, threads, half, micro, bw, fw.speed)
            traffic += cost.bytes
    # The update walks the parameters one tensor at a time on the main thread
    # (the Meizu rows: AlexNet at batch 1 spends half its step updating 30M
    # parameters while `top` shows ~2.5 of 4 cores busy), so it is serial.
    main_gflops = consts.core_peak_gflops(main.cluster.arch, main.freq_ghz)
    times["optimizer"] = _roofline(
        workload.optimizer, fitted.optimizer, main_gflops, 1, half, 1, bw, fw.speed
    )
    traffic += workload.optimizer.bytes
    # Serial main-thread work, in cycles of the fastest active core.
    hz = main.freq_ghz * 1e9 * consts.core_ipc_scale(main.cluster.arch)
    times["overhead"] = fw.step_overhead_mcycles * 1e6 * micro / hz
    times["input"] = workload.input_bytes * fw.input_cycles_per_byte / hz

    parallel_s = sum(times[t] for t in OP_CLASSES)
    serial_s = times["overhead"] + times["input"] + times["optimizer"]
    share = profile.os.background_share if background else 1.0
    seconds = (parallel_s + serial_s) / share
    cpu_j = (
        parallel_power_w(profile, active) * parallel_s + serial_power_w(profile, main) * serial_s
    )
    energy = {
        "idle": profile.power.idle_w * seconds,
        "cpu": cpu_j,
        "memory": profile.power.mem_w_per_gbs * traffic / GB,
    }
    foreground = parallel_s + serial_s
    busy = (threads * parallel_s + serial_s) / foreground * share if foreground else 0.0
    freq = sum(a.freq_ghz * a.threads for a in active) / threads
    return StepCost(
        seconds=seconds,
        time_s={k: v / share for k, v in times.items()},
        energy_j=energy,
        freq_ghz=freq,
        busy_cores=busy,
        dram_gb=traffic / GB,
    )
