"""Jetson power rails: TI INA3221 monitors, in both sysfs layouts.

Older L4T kernels (TX1/TX2/Nano/Xavier, L4T <= 32) expose the ina3221x
IIO driver: /sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<k>/ with
`rail_name_<i>` and `in_power<i>_input` in mW (also in_current<i>_input
mA and in_voltage<i>_input mV, used when the power file is missing).
Newer kernels (Orin, L4T >= 34, and mainline) use the hwmon ina3221
driver: a /sys/class/hwmon/hwmon<k>/ whose `name` is "ina3221", with
channels 1-3 as `in<i>_label`, `in<i>_input` (bus voltage, mV) and
`curr<i>_input` (mA); in4-in7 are shunt voltages and curr4 a sum, not
rails, and a channel with `in<i>_enable` 0 is unconnected.

The total: the module input rail (VDD_IN on TX2/Xavier NX/Orin, POM_5V_IN
on Nano) already contains every other rail, so when present it is the
total and the source has "device" scope; otherwise (AGX Xavier lists only
the sub-rails) the rails are summed and the scope is "component".
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from fedbench.measure.probe.source import COMPONENT, DEVICE, PowerSource
from fedbench.measure.probe.sysfs import glob_sorted, read_int, read_text

INPUT_RAILS: frozenset[str] = frozenset({"VDD_IN", "POM_5V_IN"})
_HWMON_RAILS = (1, 2, 3)


def rails_total_w(rails: Mapping[str, float]) -> float | None:
    """The device total from per-rail watts (module doc)."""
    for name in INPUT_RAILS:
        if name in rails:
            return rails[name]
    return sum(rails.values()) if rails else None


class _RailSource(PowerSource):
    """Named rails; subclasses find each rail's files and turn them into watts."""

    def __init__(self, rails: dict[str, tuple[Path, ...]]) -> None:
        self._rails = rails  # rail name -> files its power is computed from
        self._channels: dict[str, float] = {}
        self.scope = DEVICE if INPUT_RAILS & set(rails) else COMPONENT

    @abstractmethod
    def rail_power_w(self, files: tuple[Path, ...]) -> float | None:
        """One rail's watts from its files, None if they cannot be read."""

    def available(self) -> bool:
        return any(self.rail_power_w(f) is not None for f in self._rails.values())

    def read(self) -> float | None:
        self._channels = {}
        for rail, files in self._rails.items():
            watts = self.rail_power_w(files)
            if watts is not None:
                self._channels[rail] = watts
        return rails_total_w(self._channels)

    def channels(self) -> dict[str, float]:
        return self._channels


def iio_rail_power_w(
    power_mw: int | None, current_ma: int | None, voltage_mv: int | None
) -> float | None:
    """One ina3221x IIO rail in W: the power file, else current x voltage."""
    if power_mw is not None:
        return power_mw / 1e3
    if current_ma is not None and voltage_mv is not None:
        return current_ma * voltage_mv / 1e6
    return None


class Ina3221IioSource(_RailSource):
    """The ina3221x IIO layout of L4T <= 32 (TX2, Nano, Xavier)."""

    name: ClassVar[str] = "ina3221"

    def __init__(self, root: Path) -> None:
        rails: dict[str, tuple[Path, ...]] = {}
        pattern = "sys/bus/i2c/drivers/ina3221x/*/iio:device*/rail_name_*"
        for name_file in glob_sorted(root, pattern):
            rail = read_text(name_file)
            index = name_file.name.removeprefix("rail_name_")
            if rail and index.isdigit():
                d = name_file.parent
                rails[rail] = (
                    d / f"in_power{index}_input",
                    d / f"in_current{index}_input",
                    d / f"in_voltage{index}_input",
                )
        super().__init__(rails)

    def rail_power_w(self, files: tuple[Path, ...]) -> float | None:
        power, current, voltage = (read_int(f) for f in files)
        return iio_rail_power_w(power, current, voltage)


class Ina3221HwmonSource(_RailSource):
    """The hwmon ina3221 layout of L4T >= 34 (Orin) and mainline kernels."""

    name: ClassVar[str] = "ina3221_hwmon"

    def __init__(self, root: Path) -> None:
        rails: dict[str, tuple[Path, ...]] = {}
        for chip in glob_sorted(root, "sys/class/hwmon/hwmon*"):
            if read_text(chip / "name") != "ina3221":
                continue
            for i in _HWMON_RAILS:
                label = read_text(chip / f"in{i}_label")
                if not label or read_int(chip / f"in{i}_enable") == 0:
                    continue
                # Two chips may both label a channel "NC"; keep rails apart.
                key = label if label not in rails else f"{chip.name}:{label}"
                rails[key] = (chip / f"in{i}_input", chip / f"curr{i}_input")
        super().__init__(rails)

    def rail_power_w(self, files: tuple[Path, ...]) -> float | None:
        voltage_mv, current_ma = (read_int(f) for f in files)
        if voltage_mv is None or current_ma is None:
            return None
        return voltage_mv * current_ma / 1e6
