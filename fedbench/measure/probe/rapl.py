"""Linux powercap / Intel RAPL: energy counters of the CPU package and DRAM.

Each zone /sys/class/powercap/intel-rapl:<n>[:<m>] has a `name`
(package-<n>, core, uncore, dram, psys), a cumulative `energy_uj` counter
and `max_energy_range_uj`, where the counter wraps to zero. A reading
below the previous one therefore means one wrap, and the delta is
`cur + max_range - prev` (the counter is sampled far more often than the
minutes one wrap takes).

Which zones make the total: core and uncore are parts of their package,
so they are channels only; DRAM is outside the package and is added; psys
(the whole SoC platform, where present) contains both and is then the
total alone. RAPL covers the processor, not the device, so its scope is
"component". Since Linux 5.10 energy_uj is readable by root only; the
source is then absent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.measure.probe.source import COMPONENT, PowerSource
from fedbench.measure.probe.sysfs import glob_sorted, read_int, read_text

# A counter updates about every millisecond; a shorter delta is mostly
# quantisation, so power waits for a longer one (energy is still counted).
_MIN_POWER_DT_S = 0.002


def counter_delta(prev: int, cur: int, max_range: int) -> int:
    """Energy (uJ) between two readings of a counter that wraps at `max_range`."""
    return cur - prev if cur >= prev else cur + max_range - prev


@dataclass(frozen=True)
class RaplZone:
    channel: str  # "<dir>:<name>", e.g. "intel-rapl:0:package-0"
    energy_path: Path
    max_range_uj: int
    in_total: bool


def total_zone_names(names: list[str]) -> set[str]:
    """Which zone names add up to the processor total (module doc)."""
    if "psys" in names:
        return {"psys"}
    return {n for n in names if n.startswith("package") or n == "dram"}


def find_zones(root: Path) -> list[RaplZone]:
    """Readable RAPL zones under `root`."""
    found: list[tuple[Path, str, int]] = []
    for zone in glob_sorted(root, "sys/class/powercap/intel-rapl:*"):
        name = read_text(zone / "name")
        max_range = read_int(zone / "max_energy_range_uj")
        if name and max_range and read_int(zone / "energy_uj") is not None:
            found.append((zone, name, max_range))
    total = total_zone_names([name for _, name, _ in found])
    return [
        RaplZone(f"{zone.name}:{name}", zone / "energy_uj", max_range, name in total)
        for zone, name, max_range in found
    ]


class RaplSource(PowerSource):
    """Processor power from RAPL counters; energy_j() is the exact counter sum."""

    name: ClassVar[str] = "rapl"
    scope = COMPONENT

    def __init__(self, root: Path, clock: Callable[[], float] = time.perf_counter) -> None:
        self._zones = find_zones(root)
        self._clock = clock
        self._last_t = 0.0
        self._pending: dict[str, int] = {}  # uJ since the baseline, wraps resolved
        self._prev: dict[str, int] = {}  # counter at the previous read
        self._energy_uj = 0
        self._channels: dict[str, float] = {}

    def available(self) -> bool:
        return any(z.in_total for z in self._zones)

    def start(self) -> None:
        self._prev, self._pending, self._energy_uj, self._last_t = {}, {}, 0, 0.0

    def read(self) -> float | None:
        now = self._clock()
        first = not self._prev
        for zone in self._zones:
            cur = read_int(zone.energy_path)
            if cur is None:
                continue
            prev = self._prev.get(zone.channel)
            if prev is not None:
                delta = counter_delta(prev, cur, zone.max_range_uj)
                self._pending[zone.channel] = self._pending.get(zone.channel, 0) + delta
                if zone.in_total:
                    self._energy_uj += delta
            self._prev[zone.channel] = cur
        dt = now - self._last_t
        if first or dt < _MIN_POWER_DT_S:
            if first:
                self._last_t = now
            self._channels = {}
            return None
        self._channels = {ch: uj / 1e6 / dt for ch, uj in self._pending.items()}
        total = sum(
            self._channels[z.channel]
            for z in self._zones
            if z.in_total and z.channel in self._channels
        )
        self._pending, self._last_t = {}, now
        return total

    def channels(self) -> dict[str, float]:
        return self._channels

    def energy_j(self) -> float | None:
        return self._energy_uj / 1e6
