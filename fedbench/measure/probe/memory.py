"""Memory sources: this process's resident set and the system's available memory.

Process. /proc/self/status gives VmRSS (now) and VmHWM (the peak since the
process started or since the peak was last reset). At start the source
resets the peak by writing "5" to /proc/self/clear_refs (Linux >= 4.0), so
VmHWM then holds the true peak during sampling, including spikes between
two samples. Without /proc (a non-Linux host) psutil gives RSS and the peak
is only the largest sampled RSS.

System. MemAvailable in /proc/meminfo is the kernel's estimate of memory
a new workload can take without swapping (free + reclaimable cache).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import ClassVar

import psutil

from fedbench.measure.probe.source import Source
from fedbench.measure.probe.sysfs import is_real_root, read_text

HWM = "hwm"  # channel of ProcessMemorySource: peak RSS in MB
_KB_PER_MB = 1024.0


def parse_kb_fields(text: str) -> dict[str, float]:
    """ "Key:  1234 kB" lines (status, meminfo) as {key: MB}."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) / _KB_PER_MB
    return out


class ProcessMemorySource(Source):
    """This process's RSS in MB; channel "hwm" is its peak RSS since start."""

    name: ClassVar[str] = "process_mem"
    unit: ClassVar[str] = "MB"

    def __init__(self, root: Path) -> None:
        self._status = root / "proc/self/status"
        self._clear_refs = root / "proc/self/clear_refs"
        self._psutil = psutil.Process() if is_real_root(root) else None
        self._channels: dict[str, float] = {}

    def available(self) -> bool:
        return self._from_status() is not None or self._psutil is not None

    def start(self) -> None:
        # Only an existing clear_refs is written: opening a missing path for
        # writing would create a file in a fixture tree.
        # Not permitted (hardened kernel): the peak then includes history.
        if self._clear_refs.exists():
            with contextlib.suppress(OSError):
                self._clear_refs.write_text("5")

    def _from_status(self) -> dict[str, float] | None:
        text = read_text(self._status)
        if text is None:
            return None
        fields = parse_kb_fields(text)
        return fields if "VmRSS" in fields else None

    def read(self) -> float | None:
        fields = self._from_status()
        if fields is not None:
            self._channels = {HWM: fields["VmHWM"]} if "VmHWM" in fields else {}
            return fields["VmRSS"]
        if self._psutil is None:
            return None
        rss = self._psutil.memory_info().rss / 2**20
        self._channels = {HWM: max(rss, self._channels.get(HWM, 0.0))}
        return rss

    def channels(self) -> dict[str, float]:
        return self._channels


class SystemMemorySource(Source):
    """Memory available to new work system-wide, in MB."""

    name: ClassVar[str] = "mem_available"
    unit: ClassVar[str] = "MB"

    def __init__(self, root: Path) -> None:
        self._meminfo = root / "proc/meminfo"
        self._use_psutil = is_real_root(root)

    def available(self) -> bool:
        return self.read() is not None

    def read(self) -> float | None:
        text = read_text(self._meminfo)
        if text is not None:
            return parse_kb_fields(text).get("MemAvailable")
        if self._use_psutil:
            return psutil.virtual_memory().available / 2**20
        return None
