"""CPU sources: per-core utilisation from /proc/stat and frequency from cpufreq.

Utilisation. /proc/stat counts, per core, the time spent in each state in
USER_HZ ticks (1/100 s on Linux). A 10 ms sample therefore sees 0 or 1
tick per core, so the source records the cumulative busy and total ticks
as channels and summaries take utilisation over a window as
delta-busy / delta-total, which is exact at any window length the counters
resolve. Busy is user + nice + system + irq + softirq + steal; idle is
idle + iowait; guest time is already inside user and is not added again.

Frequency. cpufreq's scaling_cur_freq (kHz) is the frequency the governor
last set (on Intel, an estimate of the actual one); cpuinfo_max_freq is the
highest step the core can reach, read once at start for `throttled_frac`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from fedbench.measure.probe.source import Source
from fedbench.measure.probe.sysfs import glob_sorted, read_int, read_text

BUSY_PREFIX = "busy:"  # channel name prefixes of ProcStatSource
TOTAL_PREFIX = "total:"
MAX_PREFIX = "max:"  # static key prefix of CpuFreqSource
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal
_IDLE_FIELDS = (3, 4)  # idle iowait


def parse_proc_stat(text: str) -> dict[str, tuple[int, int]]:
    """Per core ("cpu0", ...) the cumulative (busy, total) ticks in /proc/stat."""
    cores: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        values = [int(v) for v in rest.split()]
        values += [0] * (8 - len(values))  # old kernels lack steal
        busy = sum(values[i] for i in _BUSY_FIELDS)
        cores[name] = (busy, busy + sum(values[i] for i in _IDLE_FIELDS))
    return cores


def utilisation(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, float]:
    """Per core busy fraction between two /proc/stat readings (cores with ticks)."""
    util: dict[str, float] = {}
    for core, (busy, total) in after.items():
        if core not in before:
            continue
        d_total = total - before[core][1]
        if d_total > 0:
            util[core] = min(1.0, max(0.0, (busy - before[core][0]) / d_total))
    return util


class ProcStatSource(Source):
    """Per-core CPU utilisation; read() is the mean over cores since the last read."""

    name: ClassVar[str] = "cpu_util"
    unit: ClassVar[str] = "frac"

    def __init__(self, root: Path) -> None:
        self._path = root / "proc/stat"
        self._last: dict[str, tuple[int, int]] = {}
        self._channels: dict[str, float] = {}

    def available(self) -> bool:
        text = read_text(self._path)
        return text is not None and bool(parse_proc_stat(text))

    def read(self) -> float | None:
        text = read_text(self._path)
        if text is None:
            self._channels = {}
            return None
        now = parse_proc_stat(text)
        util = utilisation(self._last, now)
        self._last = now
        self._channels = {}
        for core, (busy, total) in now.items():
            self._channels[BUSY_PREFIX + core] = float(busy)
            self._channels[TOTAL_PREFIX + core] = float(total)
        return sum(util.values()) / len(util) if util else None

    def channels(self) -> dict[str, float]:
        return self._channels


class CpuFreqSource(Source):
    """Per-core current frequency in GHz; read() is the mean over cores."""

    name: ClassVar[str] = "cpu_freq"
    unit: ClassVar[str] = "GHz"

    def __init__(self, root: Path) -> None:
        self._dirs = {
            d.parent.name: d for d in glob_sorted(root, "sys/devices/system/cpu/cpu[0-9]*/cpufreq")
        }
        self._channels: dict[str, float] = {}

    def static(self) -> dict[str, float]:
        """Per core ("max:cpu0") the highest frequency it can run at, in GHz."""
        out: dict[str, float] = {}
        for core, d in self._dirs.items():
            khz = read_int(d / "cpuinfo_max_freq")
            if khz:
                out[MAX_PREFIX + core] = khz / 1e6
        return out

    def available(self) -> bool:
        return any(read_int(d / "scaling_cur_freq") for d in self._dirs.values())

    def read(self) -> float | None:
        self._channels = {}
        for core, d in self._dirs.items():
            khz = read_int(d / "scaling_cur_freq")
            if khz:  # offline cores have no file; 0 is not a frequency
                self._channels[core] = khz / 1e6
        if not self._channels:
            return None
        return sum(self._channels.values()) / len(self._channels)

    def channels(self) -> dict[str, float]:
        return self._channels
