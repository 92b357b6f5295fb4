"""What a call cost this process on the host: CPU time, peak resident memory, the host's clock.

The emulator costs the aten ops a user's call ran (fedbench.measure.live); work
outside torch (numpy, scikit-learn, XGBoost) runs no such op, and is costed
from what the host can measure about the call instead
(fedbench.devices.cpu_time):

- CPU time: `time.process_time()` over the call, every thread of the process,
  user + system (so a BLAS call that spread over threads counts each);
- peak memory: the resident set's peak during the call less the resident set
  at its start. On Linux the kernel's peak (VmHWM) is reset when the call
  starts (`/proc/self/clear_refs`, as the probe does: fedbench.measure.probe.memory),
  so it is the call's own peak; elsewhere only the resident set at the end;
- the host's core clock, what a CPU second is worth in cycles: cpufreq's
  highest clock over the CPUs this process may run on, else /proc/cpuinfo's
  `cpu MHz` (a VM's nominal clock), else `DEFAULT_HOST_GHZ`.

`serial_blas` holds the process's BLAS libraries (numpy's and scipy's
OpenBLAS, MKL) to one thread for a call: their idle helper threads spin,
and on the 2-core test host a 4.5 ms scikit-learn fit measured 9 to 37 ms
of CPU time with two of them, 4.5 ms with one.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from threadpoolctl import ThreadpoolController

from fedbench.measure.probe.memory import HWM, ProcessMemorySource
from fedbench.measure.probe.sysfs import read_int, read_text

# A host that tells no clock (no cpufreq, no /proc/cpuinfo: macOS): a desktop or server
# core's typical sustained clock, an assumption the docs state (docs/apps.md).
DEFAULT_HOST_GHZ = 3.0
_MHZ = re.compile(r"^cpu MHz\s*:\s*([0-9.]+)", re.M)


@dataclass(frozen=True)
class Usage:
    """What one call cost the process."""

    cpu_s: float  # CPU seconds of every thread of the process over the call
    wall_s: float  # host seconds the call took
    rss_start_mb: float  # resident set when it started (NaN: unknown)
    peak_rss_mb: float  # the resident set's peak during the call (NaN: unknown)

    @property
    def growth_mb(self) -> float:
        """MB the call's peak held above where the process started it (0 when it shrank)."""
        grown = self.peak_rss_mb - self.rss_start_mb
        return max(0.0, grown) if math.isfinite(grown) else math.nan


class UsageWatch:
    """Measures the Usage of the block it surrounds (`with UsageWatch() as w: ...; w.usage`)."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.memory = ProcessMemorySource(root)
        self.usage: Usage | None = None

    def __enter__(self) -> UsageWatch:
        self.memory.start()  # the kernel's peak, reset to now where it can be
        rss = self.memory.read()
        self.rss_start = math.nan if rss is None else rss
        self.cpu_start = time.process_time()
        self.wall_start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        cpu = time.process_time() - self.cpu_start
        wall = time.perf_counter() - self.wall_start
        rss = self.memory.read()
        peak = self.memory.channels().get(HWM, math.nan if rss is None else rss)
        self.usage = Usage(cpu, wall, self.rss_start, peak)


@functools.lru_cache(maxsize=1)
def host_core_ghz(root: Path = Path("/")) -> float:
    """The clock of this host's fastest core this process may run on, GHz (module docstring)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = list(range(os.cpu_count() or 1))
    khz = [read_int(root / f"sys/devices/system/cpu/cpu{c}/cpufreq/cpuinfo_max_freq") for c in cpus]
    known = [k for k in khz if k]
    if known:
        return max(known) / 1e6
    mhz = [float(m) for m in _MHZ.findall(read_text(root / "proc/cpuinfo") or "")]
    mhz = [m for m in mhz if m > 0]
    return max(mhz) / 1e3 if mhz else DEFAULT_HOST_GHZ


_controller: tuple[int, ThreadpoolController] | None = None


@contextlib.contextmanager
def serial_blas() -> Iterator[None]:
    """The process's BLAS thread pools held to one thread inside the block (module docstring).

    Finding the pools reads every loaded library (milliseconds), so it is done
    again only when a module was imported since (a library may have come with it).
    """
    global _controller
    if _controller is None or _controller[0] != len(sys.modules):
        _controller = (len(sys.modules), ThreadpoolController())
    with _controller[1].limit(limits=1, user_api="blas"):
        yield
