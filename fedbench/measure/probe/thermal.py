"""Temperature sources: kernel thermal zones and hwmon temperature inputs.

Both report millidegrees Celsius (sysfs ABI). A reading is kept only if it
is a plausible device temperature, -30..150 C, and its raw value is at
least 1000 in magnitude: some vendor drivers report whole or tenth degrees
instead, and a value such as 35 cannot be told apart from 0.035 C, so it is
dropped (absent) rather than guessed. Zones whose sensor is off fail to
read (EIO/ENODATA) and are skipped that sample. Tegra's "PMIC-Die" zone
(TX1/TX2/Nano) always reads 100 C: it is a trip placeholder, not a sensor,
and is ignored. read() is the hottest channel, the one throttling reacts to.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from fedbench.measure.probe.source import Source
from fedbench.measure.probe.sysfs import glob_sorted, read_int, read_text

_MIN_C, _MAX_C = -30.0, 150.0
IGNORED_ZONE_TYPES: frozenset[str] = frozenset({"PMIC-Die"})


def millidegrees_to_c(raw: int | None) -> float | None:
    """A sysfs temperature in C, or None if missing or implausible (module doc)."""
    if raw is None or abs(raw) < 1000:
        return None
    celsius = raw / 1000.0
    return celsius if _MIN_C <= celsius <= _MAX_C else None


class _TemperatureSource(Source):
    unit: ClassVar[str] = "C"

    def __init__(self, files: dict[str, Path]) -> None:
        self._files = files  # channel name -> *_input or temp file
        self._channels: dict[str, float] = {}

    def available(self) -> bool:
        return any(millidegrees_to_c(read_int(p)) is not None for p in self._files.values())

    def read(self) -> float | None:
        self._channels = {}
        for channel, path in self._files.items():
            celsius = millidegrees_to_c(read_int(path))
            if celsius is not None:
                self._channels[channel] = celsius
        return max(self._channels.values()) if self._channels else None

    def channels(self) -> dict[str, float]:
        return self._channels


class ThermalZoneSource(_TemperatureSource):
    """/sys/class/thermal/thermal_zone*/temp; channels "<zone>:<type>"."""

    name: ClassVar[str] = "thermal"

    def __init__(self, root: Path) -> None:
        files: dict[str, Path] = {}
        for zone in glob_sorted(root, "sys/class/thermal/thermal_zone*"):
            kind = read_text(zone / "type") or "unknown"
            if kind in IGNORED_ZONE_TYPES:
                continue
            files[f"{zone.name}:{kind}"] = zone / "temp"
        super().__init__(files)


class HwmonTempSource(_TemperatureSource):
    """/sys/class/hwmon/hwmon*/temp*_input; channels "<hwmon>:<name>:<label>"."""

    name: ClassVar[str] = "hwmon_temp"

    def __init__(self, root: Path) -> None:
        files: dict[str, Path] = {}
        for path in glob_sorted(root, "sys/class/hwmon/hwmon*/temp*_input"):
            chip = read_text(path.parent / "name") or "unknown"
            base = path.name.removesuffix("_input")
            label = read_text(path.parent / f"{base}_label") or base
            files[f"{path.parent.name}:{chip}:{label}"] = path
        super().__init__(files)
