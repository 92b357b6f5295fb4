"""Which meter a device gets: the one place that maps a profile name to a meter.

"host" is this machine measured by wall clock only; "physical" is a fleet
slot for a real device that joins over the network and measures itself
with its probe (fedbench.devices.probe_meter); any other name is a device
profile, emulated (DESIGN.md: only the meter and the launcher know whether
a device is physical or emulated).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedbench.core.meter import Meter
from fedbench.devices.meter import HostMeter

HOST = "host"
PHYSICAL = "physical"
# Fleet profile names that are not files in device_profiles/.
PROFILELESS: tuple[str, ...] = (HOST, PHYSICAL)


def make_meter(profile: str, knobs: Mapping[str, Any] | None = None) -> Meter:
    if profile == HOST:
        return HostMeter()
    if profile == PHYSICAL:
        from fedbench.devices.probe_meter import ProbeMeter

        return ProbeMeter()
    # Imported here: the emulator pulls in the profile loader and workload
    # measurement, which a host-only run never needs.
    from fedbench.devices.emulated_meter import EmulatedMeter
    from fedbench.devices.profile import load_profile

    return EmulatedMeter.from_config(load_profile(profile), knobs or {})
