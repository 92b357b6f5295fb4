"""The physical device's meter: real training measured by the probe.

`ProbeMeter.measure` runs the client's training under a `Probe`
(fedbench/measure/probe) and turns the trace over the training window into
a `Cost`:

- latency_s: wall time of `train()`;
- energy_j / avg_power_w: the device total over the window (trace.py: a
  whole-device rail or the battery when discharging, else RAPL + GPU);
  NaN when the device has no power sensor, or runs on a charger that only
  a battery could have seen;
- peak_mem_mb: what training added to this process's resident memory,
  peak RSS during training minus RSS at its start. It is compared with
  mem_budget_mb, the system's available memory at the start (MemAvailable),
  which is what that increase has to fit into. The absolute peak and the
  starting RSS are in `extra` ("peak_rss_mb", "rss_start_mb");
- temp_c_start / temp_c_end: the hottest sensor at the first and last
  sample; freq_ghz_avg, throttled_frac: as defined in trace.py;
- battery_pct: the battery's charge at the end (what the next round
  starts from), NaN without a battery; the start level is in `extra`.

Every figure the device cannot produce is NaN, never 0.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import torch

from fedbench.core.meter import Cost, Meter, TrainJob, Watch, WatchJob
from fedbench.measure.probe import Probe
from fedbench.measure.probe.sampler import check_interval


class ProbeMeter(Meter):
    """Measures real training on this device with its own sensors."""

    kind = "physical"
    remote = True

    def __init__(self, interval_s: float = 0.01, root: str | Path = "/") -> None:
        check_interval(interval_s)
        self.interval_s = interval_s
        self.root = Path(root)

    def budget_mb(self, job: TrainJob) -> float | None:
        """What this device can give training now: the system's available memory.

        The memory planner fits the plan to it, so a phone or board with
        little free memory trains micro-batched instead of being killed.
        """
        return psutil.virtual_memory().available / 2**20

    def budget_fn(self, model: torch.nn.Module, job: TrainJob) -> Callable[[int], float] | None:
        # Other apps take and release memory during training: read it before every step.
        return lambda step: psutil.virtual_memory().available / 2**20

    def measure(
        self, model: torch.nn.Module, job: TrainJob, train: Callable[[], float]
    ) -> tuple[float | None, Cost]:
        with self.watch(None) as watch:
            loss = train()
        plan = f"bs{max(job.batch_sizes)}" if job.batch_sizes else ""
        return loss, dataclasses.replace(watch.cost(), plan=plan)

    def watch(self, job: WatchJob | None) -> ProbeWatch:
        """The probe around any call (a user's train handler, or fedbench's training)."""
        return ProbeWatch(Probe(self.interval_s, self.root))


class ProbeWatch(Watch):
    """Sensors sampled over a call; `cost()` turns the trace into a Cost."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.start = self.end = math.nan

    def __enter__(self) -> ProbeWatch:
        self.trace = self.probe.start()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.end = time.perf_counter()
        self.probe.stop()

    def cost(self) -> Cost:
        # The probe samples once just before `start` and once just after
        # `end`; integrals use the exact training window, sampled figures
        # the whole trace so a step shorter than one interval still has them.
        trace, start, end = self.trace, self.start, self.end
        peak, rss_start = trace.peak_rss_mb(), trace.rss_mb()
        growth = peak - rss_start
        extra = {
            "peak_rss_mb": peak,
            "rss_start_mb": rss_start,
            "cpu_util_avg": trace.cpu_util_avg(),
            "battery_pct_start": trace.battery_pct(trace.window()[0]),
            "probe_samples": float(len(trace)),
        }
        return Cost(
            latency_s=end - start,
            energy_j=trace.energy_j(start, end),
            avg_power_w=trace.avg_power_w(start, end),
            peak_mem_mb=max(0.0, growth) if not math.isnan(growth) else math.nan,
            mem_budget_mb=trace.mem_available_mb(),
            temp_c_start=trace.temp_start(),
            temp_c_end=trace.temp_end(),
            freq_ghz_avg=trace.freq_ghz_avg(),
            throttled_frac=trace.throttled_frac(),
            battery_pct=trace.battery_pct(),
            cost_basis="probe",
            extra=extra,
        )
