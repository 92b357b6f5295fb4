"""The probe's source interface: one small class per kind of sensor.

A source is asked once whether the device has it (`available`); the sampler
keeps only the available ones, so a sensor the device lacks is absent from
the trace, never a column of zeros. Each sample the sampler calls `read`
(the source's headline value: total watts, hottest zone, RSS, ...) and then
`channels` (the per-rail, per-core or per-zone values behind it, from the
same read). A read that fails returns None and the sample holds NaN.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

# Power source scopes: a "device" source measures the whole device (module
# input rail, battery discharge), a "component" source one part of it (CPU
# package, GPU board). Totals use a device source when there is one and sum
# the component sources otherwise, so nothing is counted twice.
DEVICE = "device"
COMPONENT = "component"


class Source(ABC):
    """One kind of sensor on the device."""

    name: ClassVar[str]
    unit: ClassVar[str]

    @abstractmethod
    def available(self) -> bool:
        """Whether the device has this sensor and this process can read it."""

    @abstractmethod
    def read(self) -> float | None:
        """The headline value now, or None if there is no reading this time."""

    def channels(self) -> dict[str, float]:
        """Per-channel values of the last `read` (missing channels omitted)."""
        return {}

    def static(self) -> dict[str, float]:
        """Constants of the device read once at start (e.g. maximum frequencies)."""
        return {}

    def start(self) -> None:  # noqa: B027 - optional hook, most sources keep no state
        """Called once when sampling starts, after `available` said yes."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when sampling stops."""


class PowerSource(Source):
    """A source of electrical power in watts."""

    unit: ClassVar[str] = "W"
    scope: str = COMPONENT

    def energy_j(self) -> float | None:
        """Energy in J since `start`, from a hardware counter; None without one.

        Where a counter exists it is exact between samples, so energy
        summaries prefer it over integrating sampled power.
        """
        return None
