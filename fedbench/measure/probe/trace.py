"""ProbeTrace: what the sampler recorded, and the summaries a report needs.

Storage. One time axis (time.perf_counter seconds, the clock callers use
for their own timestamps) and one column per key, NaN where a sample has no
reading. Keys: a source's name for its headline value ("rapl",
"thermal"), "<source>/<channel>" for its channels ("ina3221/VDD_IN",
"cpu_freq/cpu0"), "<source>.energy_j" for a hardware energy counter.
Sources the device lacks have no column at all.

Windows. Every summary takes an optional window [t0, t1] (default: the
whole trace). Callers mark step starts with `mark(label)`;
`after_warmup(n)` is the window from the start of step n (0-based) to the
end, so summaries over it exclude n warm-up steps (paper 000 excluded 3).

Summaries:
- energy_j: a hardware counter's delta where the source has one, else the
  trapezoid integral of sampled power (series.py). Without a source named,
  the device total: the first "device"-scope source (module input rail,
  battery), else the sum of all "component" sources (RAPL + GPU).
- cpu_util_avg: per-core busy/total tick deltas over the window, averaged
  over cores (paper 000 Eq. 2).
- freq_ghz_avg: per-core mean sampled frequency, weighted by each core's
  utilisation in the window: the frequency the work ran at, not that of
  idle cores parked low by the governor.
- throttled_frac: fraction of samples in which the busy cores (utilisation
  >= 0.5 over the window; all cores if none is) ran on average more than 5%
  below their cpuinfo_max_freq. On Intel, cpuinfo_max_freq is the
  single-core turbo, so all-core load reads as throttled there; on the ARM
  boards and phones this targets it is the top DVFS step.
- peak_rss_mb: the larger of the sampled RSS and the kernel's peak (VmHWM,
  reset at start) when that peak rose inside the window.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping

import numpy as np

from fedbench.measure.probe.battery import BatteryLevelSource
from fedbench.measure.probe.cpu import (
    BUSY_PREFIX,
    MAX_PREFIX,
    TOTAL_PREFIX,
    CpuFreqSource,
    ProcStatSource,
)
from fedbench.measure.probe.memory import HWM, ProcessMemorySource, SystemMemorySource
from fedbench.measure.probe.series import integrate, value_at
from fedbench.measure.probe.source import DEVICE

ENERGY_SUFFIX = ".energy_j"
THROTTLE_RATIO = 0.95
BUSY_UTIL = 0.5


class ProbeTrace:
    """Samples of every available source on one time axis (module doc)."""

    def __init__(
        self,
        interval_s: float,
        units: Mapping[str, str],
        power_scopes: Mapping[str, str],
        static: Mapping[str, float],
    ) -> None:
        self.interval_s = interval_s
        self.units = dict(units)  # source name -> unit, in sampling order
        self.power_scopes = dict(power_scopes)  # power source -> scope, in priority order
        self.static = dict(static)  # "<source>/<key>" -> constant
        self._t: list[float] = []
        self._cols: dict[str, list[float]] = {}
        self._marks: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    # -- recording -------------------------------------------------------

    def record(self, t: float, values: Mapping[str, float]) -> None:
        """Append one sample (the sampler's job)."""
        with self._lock:
            n = len(self._t)
            for key in values.keys() - self._cols.keys():
                self._cols[key] = [math.nan] * n
            for key, col in self._cols.items():
                col.append(values.get(key, math.nan))
            self._t.append(t)

    def mark(self, label: str, t: float | None = None) -> None:
        """Record that step `label` starts now (or at `t`, perf_counter seconds)."""
        when = time.perf_counter() if t is None else t
        with self._lock:
            self._marks.append((when, label))

    # -- access ------------------------------------------------------------

    @property
    def t(self) -> np.ndarray:
        with self._lock:
            return np.asarray(self._t, dtype=float)

    def series(self, key: str) -> np.ndarray:
        """The column `key` (all NaN if no sample had it)."""
        with self._lock:
            col = self._cols.get(key)
            return np.asarray(col if col is not None else [math.nan] * len(self._t), float)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._cols)

    def sources(self) -> list[str]:
        """Names of the sources this device has, in sampling order."""
        return list(self.units)

    @property
    def marks(self) -> list[tuple[float, str]]:
        with self._lock:
            return list(self._marks)

    def __len__(self) -> int:
        with self._lock:
            return len(self._t)

    # -- windows -----------------------------------------------------------

    def window(self, t0: float | None = None, t1: float | None = None) -> tuple[float, float]:
        """[t0, t1] with the trace's first and last sample as defaults."""
        t = self.t
        if t.size == 0:
            return (math.nan, math.nan)
        return (float(t[0]) if t0 is None else t0, float(t[-1]) if t1 is None else t1)

    def steps(self) -> list[tuple[str, float, float]]:
        """(label, start, end) of every marked step; the last ends with the trace."""
        marks = self.marks
        end = self.window()[1]
        ends = [t for t, _ in marks[1:]] + [end]
        return [(label, t, e) for (t, label), e in zip(marks, ends, strict=True)]

    def after_warmup(self, n_steps: int) -> tuple[float, float]:
        """The window from the start of step `n_steps` to the end of the trace."""
        marks = self.marks
        if n_steps < 0 or n_steps >= len(marks):
            raise ValueError(f"cannot skip {n_steps} warm-up steps: {len(marks)} steps were marked")
        return (marks[n_steps][0], self.window()[1])

    def _indices(self, t0: float, t1: float) -> np.ndarray:
        t = self.t
        return np.flatnonzero((t >= t0) & (t <= t1))

    # -- power and energy ----------------------------------------------------

    def total_power_sources(self) -> list[str]:
        """The power sources the device total is made of (module doc)."""
        for name, scope in self.power_scopes.items():
            if scope == DEVICE:
                return [name]
        return list(self.power_scopes)

    def _chosen(self, source: str | None) -> list[str]:
        if source is None:
            return self.total_power_sources()
        return [source] if source in self.power_scopes else []

    def energy_j(
        self, t0: float | None = None, t1: float | None = None, source: str | None = None
    ) -> float:
        """Energy in J over the window; NaN without a power source."""
        t0, t1 = self.window(t0, t1)
        chosen = self._chosen(source)
        if not chosen or math.isnan(t0):
            return math.nan
        t = self.t
        total = 0.0
        for name in chosen:
            counter = self.series(name + ENERGY_SUFFIX)
            if np.isfinite(counter).any():
                total += value_at(t, counter, t1) - value_at(t, counter, t0)
            else:
                total += integrate(t, self.series(name), t0, t1)
        return total

    def avg_power_w(
        self, t0: float | None = None, t1: float | None = None, source: str | None = None
    ) -> float:
        t0, t1 = self.window(t0, t1)
        if not t1 > t0:
            return math.nan
        return self.energy_j(t0, t1, source) / (t1 - t0)

    def power_series(self, source: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Sampled power in W (the device total by default); NaN where any part lacks it."""
        t = self.t
        chosen = self._chosen(source)
        if not chosen:
            return t, np.full(t.size, math.nan)
        return t, np.sum([self.series(name) for name in chosen], axis=0)

    # -- memory --------------------------------------------------------------

    def peak_rss_mb(self, t0: float | None = None, t1: float | None = None) -> float:
        t0, t1 = self.window(t0, t1)
        idx = self._indices(t0, t1)
        rss = self.series(ProcessMemorySource.name)[idx]
        hwm = self.series(f"{ProcessMemorySource.name}/{HWM}")[idx]
        candidates = [float(np.nanmax(rss))] if np.isfinite(rss).any() else []
        finite = hwm[np.isfinite(hwm)]
        # A peak that rose inside the window happened inside it.
        if finite.size >= 2 and finite[-1] > finite[0]:
            candidates.append(float(finite[-1]))
        return max(candidates) if candidates else math.nan

    def rss_mb(self, when: float | None = None) -> float:
        """Process RSS at `when` (default: the start of the trace)."""
        return self._at(ProcessMemorySource.name, when, first=True)

    def mem_available_mb(self, when: float | None = None) -> float:
        """System available memory at `when` (default: the start of the trace)."""
        return self._at(SystemMemorySource.name, when, first=True)

    def battery_pct(self, when: float | None = None) -> float:
        """Battery charge at `when` (default: the end of the trace)."""
        return self._at(BatteryLevelSource.name, when, first=False)

    def _at(self, key: str, when: float | None, first: bool) -> float:
        t0, t1 = self.window()
        if math.isnan(t0):
            return math.nan
        default = t0 if first else t1
        return value_at(self.t, self.series(key), default if when is None else when)

    # -- temperature -----------------------------------------------------------

    def _hottest(self, key: str | None) -> np.ndarray:
        keys = [key] if key else [s for s, unit in self.units.items() if unit == "C"]
        if not keys:
            return np.full(len(self), math.nan)
        stacked = np.vstack([self.series(k) for k in keys])
        out = np.full(stacked.shape[1], math.nan)
        has = np.isfinite(stacked).any(axis=0)
        out[has] = np.nanmax(stacked[:, has], axis=0)
        return out

    def temp_start(
        self, t0: float | None = None, t1: float | None = None, key: str | None = None
    ) -> float:
        """Hottest sensor (or `key`) at the first sample of the window with a reading, C."""
        return self._temp_edge(t0, t1, key, first=True)

    def temp_end(
        self, t0: float | None = None, t1: float | None = None, key: str | None = None
    ) -> float:
        """Hottest sensor (or `key`) at the last sample of the window with a reading, C."""
        return self._temp_edge(t0, t1, key, first=False)

    def _temp_edge(self, t0: float | None, t1: float | None, key: str | None, first: bool) -> float:
        t0, t1 = self.window(t0, t1)
        values = self._hottest(key)[self._indices(t0, t1)]
        values = values[np.isfinite(values)]
        if values.size == 0:
            return math.nan
        return float(values[0] if first else values[-1])

    # -- CPU -------------------------------------------------------------------

    def core_util(self, t0: float | None = None, t1: float | None = None) -> dict[str, float]:
        """Per core busy fraction over the window, from tick counters."""
        t0, t1 = self.window(t0, t1)
        t = self.t
        prefix = f"{ProcStatSource.name}/{BUSY_PREFIX}"
        util: dict[str, float] = {}
        for key in self.keys():
            if not key.startswith(prefix):
                continue
            core = key.removeprefix(prefix)
            busy = self.series(key)
            total = self.series(f"{ProcStatSource.name}/{TOTAL_PREFIX}{core}")
            d_total = value_at(t, total, t1) - value_at(t, total, t0)
            if d_total > 0:
                d_busy = value_at(t, busy, t1) - value_at(t, busy, t0)
                util[core] = min(1.0, max(0.0, d_busy / d_total))
        return util

    def cpu_util_avg(self, t0: float | None = None, t1: float | None = None) -> float:
        util = self.core_util(t0, t1)
        return sum(util.values()) / len(util) if util else math.nan

    def cpu_util_series(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean core utilisation of each sample interval (t[i-1], t[i]]."""
        return self.t, self.series(ProcStatSource.name)

    def _core_freqs(self, t0: float, t1: float) -> dict[str, np.ndarray]:
        prefix = f"{CpuFreqSource.name}/"
        idx = self._indices(t0, t1)
        return {
            key.removeprefix(prefix): self.series(key)[idx]
            for key in self.keys()
            if key.startswith(prefix)
        }

    def _busy_cores(self, t0: float, t1: float, cores: list[str]) -> list[str]:
        util = self.core_util(t0, t1)
        busy = [c for c in cores if util.get(c, 0.0) >= BUSY_UTIL]
        return busy or cores

    def freq_ghz_avg(self, t0: float | None = None, t1: float | None = None) -> float:
        t0, t1 = self.window(t0, t1)
        freqs = {c: f for c, f in self._core_freqs(t0, t1).items() if np.isfinite(f).any()}
        if not freqs:
            return math.nan
        util = self.core_util(t0, t1)
        weights = {c: util.get(c, 0.0) for c in freqs}
        if sum(weights.values()) == 0.0:
            weights = dict.fromkeys(freqs, 1.0)
        total = sum(weights.values())
        return sum(w * float(np.nanmean(freqs[c])) for c, w in weights.items()) / total

    def throttled_frac(self, t0: float | None = None, t1: float | None = None) -> float:
        t0, t1 = self.window(t0, t1)
        maxima = {
            key.removeprefix(f"{CpuFreqSource.name}/{MAX_PREFIX}"): value
            for key, value in self.static.items()
            if key.startswith(f"{CpuFreqSource.name}/{MAX_PREFIX}")
        }
        freqs = {c: f for c, f in self._core_freqs(t0, t1).items() if c in maxima}
        if not freqs:
            return math.nan
        cores = self._busy_cores(t0, t1, sorted(freqs))
        ratios = np.vstack([freqs[c] / maxima[c] for c in cores])
        has = np.isfinite(ratios).any(axis=0)
        if not has.any():
            return math.nan
        mean_ratio = np.nanmean(ratios[:, has], axis=0)
        return float(np.mean(mean_ratio < THROTTLE_RATIO))
