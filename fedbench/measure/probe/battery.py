"""Battery sources: discharge power and charge level from /sys/class/power_supply.

A supply counts as a device battery when its `type` is "Battery" and its
`scope` is not "Device" (a mouse or stylus battery is). Power comes from
`power_now` (uW) where the driver has it (many laptops), else from
`current_now` (uA) x `voltage_now` (uV).

Sign conventions differ: the sysfs ABI says current_now is negative while
discharging, and most Android fuel gauges follow it; ACPI laptop batteries
report a positive current in both directions; a few phone gauges report
discharge as positive. The source therefore takes the magnitude and uses
`status` for the direction. Only while "Discharging" is the battery flow
the device's consumption; while charging (or "Full", "Not charging",
"Unknown") the device runs from the charger, which the battery does not
see, so there is no reading (None), not a zero. Several batteries
(dual-battery laptops) are summed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.measure.probe.source import DEVICE, PowerSource, Source
from fedbench.measure.probe.sysfs import glob_sorted, read_int, read_text

DISCHARGING = "Discharging"


@dataclass(frozen=True)
class BatteryReading:
    status: str | None
    power_uw: int | None
    current_ua: int | None
    voltage_uv: int | None
    capacity_pct: int | None


def discharge_power_w(reading: BatteryReading) -> float | None:
    """Watts the device draws from this battery, or None (module doc)."""
    if reading.status != DISCHARGING:
        return None
    if reading.power_uw is not None:
        return abs(reading.power_uw) / 1e6
    if reading.current_ua is not None and reading.voltage_uv is not None:
        return abs(reading.current_ua) * reading.voltage_uv / 1e12
    return None


def find_batteries(root: Path) -> list[Path]:
    """Device batteries under `root` (module doc)."""
    return [
        d
        for d in glob_sorted(root, "sys/class/power_supply/*")
        if read_text(d / "type") == "Battery" and read_text(d / "scope") != "Device"
    ]


def read_battery(supply: Path) -> BatteryReading:
    return BatteryReading(
        status=read_text(supply / "status"),
        power_uw=read_int(supply / "power_now"),
        current_ua=read_int(supply / "current_now"),
        voltage_uv=read_int(supply / "voltage_now"),
        capacity_pct=read_int(supply / "capacity"),
    )


class BatterySource(PowerSource):
    """Device power while on battery; channels per battery ("BAT0", "battery")."""

    name: ClassVar[str] = "battery"
    scope = DEVICE

    def __init__(self, root: Path) -> None:
        self._supplies = find_batteries(root)
        self._channels: dict[str, float] = {}

    def available(self) -> bool:
        # A battery that can tell power (now or once unplugged) is a source
        # even while charging; its samples are then NaN.
        for supply in self._supplies:
            r = read_battery(supply)
            if r.power_uw is not None or (r.current_ua is not None and r.voltage_uv is not None):
                return True
        return False

    def read(self) -> float | None:
        self._channels = {}
        for supply in self._supplies:
            watts = discharge_power_w(read_battery(supply))
            if watts is not None:
                self._channels[supply.name] = watts
        return sum(self._channels.values()) if self._channels else None

    def channels(self) -> dict[str, float]:
        return self._channels


class BatteryLevelSource(Source):
    """Battery charge in percent (mean of the device batteries' `capacity`)."""

    name: ClassVar[str] = "battery_level"
    unit: ClassVar[str] = "pct"

    def __init__(self, root: Path) -> None:
        self._supplies = find_batteries(root)

    def available(self) -> bool:
        return self.read() is not None

    def read(self) -> float | None:
        levels = [read_int(s / "capacity") for s in self._supplies]
        known = [v for v in levels if v is not None]
        return sum(known) / len(known) if known else None
