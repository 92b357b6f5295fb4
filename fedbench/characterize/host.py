"""`device=this`: the studies measured on this host with real timed steps.

Every step figure comes from a worker process (hostjob.py) timing real
steps under the probe, warm-up excluded. The memory split (weights,
gradients, optimizer state, activations) and FLOPs still come from the
workload measurement, which counts those bytes on this host; the peak is
what the probe saw. Figures the host has no sensor for (power on a
server without RAPL access) are NaN and written as empty cells.

Priority: with the user's apps running (one busy process per training
CPU), foreground training runs at niceness 0 against apps at 19, and
background training at 19 against apps at 0. Paper 002's ~3x is Android's
background scheduling on a phone; Linux's CFS gives a niced process far
less of a contended CPU.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext

from fedbench.characterize.device import (
    CpuConfig,
    Device,
    HostOptions,
    PhaseTime,
    StepJob,
    StepResult,
)
from fedbench.characterize.emulated import LEVELS, core_counts
from fedbench.characterize.hostcpu import allowed_cpus, busy_load, capped, cpu_groups, freq_control
from fedbench.characterize.hostjob import HostJob, HostOutcome, run_isolated
from fedbench.characterize.models import ModelRef
from fedbench.characterize.workloads import WorkloadBook, forward_pass
from fedbench.core.workload import Workload
from fedbench.devices.meters import HOST
from fedbench.errors import FedbenchError

LOWEST_PRIORITY = 19  # niceness
# priority -> (niceness of training, niceness of the competing apps or None: no apps)
NICENESS: dict[str, tuple[int, int | None]] = {
    "alone": (0, None),
    "foreground": (0, LOWEST_PRIORITY),
    "background": (LOWEST_PRIORITY, 0),
}


class HostDevice(Device):
    kind = "measured"
    name = "this"

    def __init__(self, book: WorkloadBook, options: HostOptions) -> None:
        super().__init__(book)
        if options.warmup < 0 or options.steps < 1:
            raise FedbenchError(
                f"warmup={options.warmup}, steps={options.steps}: expected warmup >= 0, steps >= 1"
            )
        cpus = allowed_cpus()
        threads = options.threads or len(cpus)
        if not 1 <= threads <= len(cpus):
            raise FedbenchError(f"threads={threads}: this process may use {len(cpus)} CPUs")
        self.options = options
        self.cpus = cpus[:threads]

    @property
    def fleet_profile(self) -> str:
        return HOST

    def _job(self, job: StepJob, profile_ops: bool = False) -> HostJob:
        # Pinned always: to the configuration's CPUs, else to the first
        # `threads` CPUs - the ones the competing apps of a priority run load.
        cpus = job.cpu.cpus if job.cpu else self.cpus
        return HostJob(
            model=job.model,
            batch_size=job.batch_size,
            warmup=self.options.warmup,
            steps=self.options.steps,
            threads=len(cpus),
            cpus=cpus,
            nice=NICENESS[job.priority][0],
            forward_only=job.forward_only,
            profile_ops=profile_ops,
        )

    def step(self, job: StepJob) -> StepResult:
        w, source = self.book.get(job.model, job.batch_size)
        if job.forward_only:
            w = forward_pass(w)
        cpu = job.cpu
        if cpu is not None and not cpu.available:
            return _result(None, w, source, cpu.reason)
        clock: AbstractContextManager[object] = nullcontext()
        if cpu is not None:
            policies, _ = freq_control(cpu.cpus)
            if policies:
                clock = capped(policies, cpu.level)
        apps_nice = NICENESS[job.priority][1]
        apps: AbstractContextManager[None] = nullcontext()
        if apps_nice is not None:
            apps = busy_load(cpu.cpus if cpu else self.cpus, apps_nice)
        with clock, apps:
            outcome = run_isolated(self._job(job))
        return _result(outcome, w, source, outcome.reason)

    def phase_times(self, model: ModelRef, batch_size: int) -> tuple[str, list[PhaseTime]]:
        outcome = run_isolated(self._job(StepJob(model, batch_size), profile_ops=True))
        if outcome.status != "ok":
            return outcome.status, []
        # Every profiled step's class rows, averaged over the steps.
        steps = len(outcome.step_times_s)
        totals: dict[tuple[str, str], float] = {}
        for row in outcome.ops:
            by_phase = {
                "forward": row.forward_s,
                "backward": row.backward_s,
                "optimizer": row.optimizer_s,
            }
            # Time outside the three phases (the profiled step's set-up) is "other".
            by_phase["other"] = max(0.0, row.time_s - sum(by_phase.values()))
            for phase, t in by_phase.items():
                key = (phase, row.op_class)
                totals[key] = totals.get(key, 0.0) + t / steps
        return "ok", [PhaseTime(p, c, t) for (p, c), t in totals.items()]

    def cpu_configs(self) -> list[CpuConfig]:
        out: list[CpuConfig] = []
        for group, cpus in cpu_groups():
            policies, why = freq_control(cpus)
            for n in core_counts(len(cpus)):
                if group == "hybrid" and n < len(cpus):
                    continue  # paper 001's hybrid row uses every core
                pinned = cpus[:n]
                for level in LEVELS:
                    # Without clock control only the governor's own clock (H) is real.
                    ok = bool(policies) or level == "H"
                    out.append(
                        CpuConfig(
                            group, n, level, cpus=pinned, available=ok, reason="" if ok else why
                        )
                    )
        return out


def _result(o: HostOutcome | None, w: Workload, source: str, reason: str) -> StepResult:
    nan = math.nan
    return StepResult(
        status=o.status if o else "unavailable",
        reason=reason,
        step_latency_s=o.step_latency_s if o else nan,
        energy_j=o.energy_j if o else nan,
        energy_idle_j=o.idle_power_w * o.step_latency_s if o else nan,
        avg_power_w=o.avg_power_w if o else nan,
        peak_mem_mb=o.peak_mem_mb if o else nan,
        mem_budget_mb=o.mem_available_mb if o else nan,
        freq_ghz=o.freq_ghz if o else nan,
        workload=w,
        workload_source=source,
    )
