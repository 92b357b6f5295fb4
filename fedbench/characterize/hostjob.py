"""Real timed steps on this host, in a fresh worker process.

Each measurement runs in its own spawned process so that what it sets
stays its own and what it measures is its own: CPU affinity is applied
before torch starts its thread pool (so every intra-op thread inherits
it), niceness to the training threads for the timed steps only, and the process's
resident memory starts from an empty heap (a previous, larger batch would
otherwise leave freed memory resident and hide the next batch's growth).

In the worker: build the model, prepare the step exactly as the workload
measurement does (fedbench.measure.step: SGD with momentum, steady-state
optimizer state), run `warmup` untimed steps, then timed steps under the
probe: at least `steps`, and more (up to MAX_STEPS) until MIN_TIMED_S of
steps were timed, so a millisecond step is not judged on three samples.
Latency is the median timed step, which a shared host's scheduling
spikes (another process preempting a thread mid-step) do not move; energy
the probe's device total over the timed window per step (NaN without a
power sensor), and the idle power sampled for half a second before the
warm-up (energy above idle is what paper 001 reports); peak memory
is the peak RSS over the timed steps minus the RSS before the model was
built (weights, gradients, optimizer state, activations, framework
buffers). With `profile_ops` the worker instead profiles each of the
`steps` steps per operator (fedbench.measure.opprofile).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

MB = float(1 << 20)
MIN_TIMED_S = 1.0
PROBE_THREAD = "fedbench-probe"  # the sampler thread's name (fedbench.measure.probe.sampler)
MAX_STEPS = 200


@dataclass(frozen=True)
class HostJob:
    model: Any  # a fedbench.characterize.models.ModelRef (kept loose: no torch import here)
    batch_size: int
    warmup: int
    steps: int
    threads: int
    cpus: tuple[int, ...] = ()  # pin to these CPUs; empty = leave the affinity
    nice: int = 0  # added niceness (19 = lowest priority)
    forward_only: bool = False
    profile_ops: bool = False


@dataclass(frozen=True)
class HostOutcome:
    status: str  # ok | oom
    reason: str
    step_latency_s: float
    step_times_s: tuple[float, ...]
    energy_j: float  # per step; NaN without a power sensor
    avg_power_w: float
    peak_mem_mb: float
    mem_available_mb: float
    freq_ghz: float
    cpu_util: float
    idle_power_w: float = math.nan  # the device idle, just before the warm-up
    ops: tuple[Any, ...] = ()  # opprofile.OpRow per op class, with profile_ops


def _failed(status: str, reason: str) -> HostOutcome:
    nan = math.nan
    return HostOutcome(status, reason, nan, (), nan, nan, nan, nan, nan, nan)


def run_job(job: HostJob) -> HostOutcome:
    """Measure `job` in this process (the worker's entry point)."""
    if job.cpus:
        os.sched_setaffinity(0, set(job.cpus))
    import psutil
    import torch

    # Imported before the baseline: their code is not the training's memory.
    import fedbench.measure.opprofile
    import fedbench.measure.probe
    import fedbench.measure.step
    import fedbench.models  # noqa: F401

    torch.set_num_threads(job.threads)
    base_rss = psutil.Process().memory_info().rss / MB
    try:
        return _measure(job, base_rss)
    except MemoryError as exc:
        return _failed("oom", f"MemoryError: {exc}")


def _measure(job: HostJob, base_rss: float) -> HostOutcome:
    import torch

    from fedbench.measure.probe import Probe
    from fedbench.measure.step import StepObserver, StepSpec, prepare, run_step

    module, spec = job.model.build()
    step = prepare(
        module, StepSpec(spec.shape, job.batch_size, input_dtype=spec.dtype, input_high=spec.high)
    )

    def train() -> None:
        run_step(step, StepObserver())

    def infer() -> None:
        with torch.no_grad():
            step.model(step.inputs)

    if job.forward_only:
        step.model.eval()
    run: Callable[[], None] = infer if job.forward_only else train
    idle_w = _idle_power_w()
    for _ in range(job.warmup):
        run()
    if job.profile_ops:
        return _profile(step, job.steps)
    times: list[float] = []
    with Probe(0.01) as trace:
        # Lowered only for the timed steps: the set-up, warm-up and the
        # probe's own thread keep their priority (slowing them would only
        # make the run long, not the steps slower). Niceness is per thread
        # on Linux, so torch's existing pool threads are lowered one by one.
        if job.nice:
            probe = {t.native_id for t in threading.enumerate() if t.name == PROBE_THREAD}
            lower_priority(job.nice, keep=probe)
        while len(times) < job.steps or (sum(times) < MIN_TIMED_S and len(times) < MAX_STEPS):
            trace.mark("step")
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        t_start, t_end = trace.marks[0][0], time.perf_counter()
    return HostOutcome(
        status="ok",
        reason="",
        step_latency_s=statistics.median(times),
        step_times_s=tuple(times),
        energy_j=trace.energy_j(t_start, t_end) / len(times),
        avg_power_w=trace.avg_power_w(t_start, t_end),
        # Sampled figures over the whole trace (one sample just before the
        # first step, one just after the last), so that steps shorter than
        # the sampling interval still have them; integrals use the exact window.
        peak_mem_mb=trace.peak_rss_mb() - base_rss,
        mem_available_mb=trace.mem_available_mb(),
        freq_ghz=trace.freq_ghz_avg(),
        cpu_util=trace.cpu_util_avg(),
        idle_power_w=idle_w,
    )


def lower_priority(nice: int, keep: set[int | None] | frozenset[int] = frozenset()) -> None:
    """Add `nice` to the niceness of every thread of this process but those in `keep`."""
    for task in os.listdir("/proc/self/task"):
        tid = int(task)
        if tid in keep:
            continue
        # A thread that ended since the listing has nothing to lower.
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)


def _idle_power_w(seconds: float = 0.5) -> float:
    """The device's power while this process sleeps; NaN (at once) without a power sensor."""
    from fedbench.measure.probe import Probe

    with Probe(0.01) as trace:
        if trace.power_scopes:
            time.sleep(seconds)
    return trace.avg_power_w() if trace.power_scopes else math.nan


def _profile(step: Any, steps: int) -> HostOutcome:
    """`steps` steps, each under torch.profiler and the probe, as opprofile.profile_step does.

    Done here rather than through profile_step because that builds a float
    input, and the zoo has integer-input models (char_cnn_lstm). The class
    rows of every step are returned; the caller averages them, since one
    profiled step on a shared host is noisy.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    from fedbench.measure.opprofile import PHASE_MARK, STEP_MARK, extract_ops, op_table
    from fedbench.measure.probe import Probe
    from fedbench.measure.step import StepObserver, run_step

    class Phases(StepObserver):
        def __init__(self) -> None:
            self.open: AbstractContextManager[Any] | None = None

        def phase(self, name: str | None) -> None:
            if self.open is not None:
                self.open.__exit__(None, None, None)
                self.open = None
            if name is not None:
                self.open = record_function(PHASE_MARK + name)
                self.open.__enter__()

    rows: list[Any] = []
    walls: list[float] = []
    for _ in range(steps):
        with (
            Probe(0.01) as trace,
            profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof,
        ):
            start = time.perf_counter()
            with record_function(STEP_MARK):
                run_step(step, Phases())
        profiled = extract_ops(prof.events(), start)
        rows += [r for r in op_table(profiled, trace) if r.level == "class"]
        walls.append(profiled.end - profiled.start)
    nan = math.nan
    mean = sum(walls) / len(walls)
    return HostOutcome("ok", "", mean, tuple(walls), nan, nan, nan, nan, nan, nan, ops=tuple(rows))


def run_isolated(job: HostJob) -> HostOutcome:
    """Measure `job` in a fresh spawned worker process and return what it measured."""
    pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"))
    try:
        return pool.submit(run_job, job).result()
    finally:
        # Not waiting for the worker to exit: a low-priority worker tears
        # torch down at a few percent of a contended CPU, which takes a
        # minute while the competing load still runs (it exits once that stops).
        pool.shutdown(wait=False)
