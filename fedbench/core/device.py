"""A fleet device: who it is, the state it carries between rounds, and its draw.

`DeviceSpec` is one device of the expanded fleet (fedbench.experiment.fleet): its index
is its position - the partition of the data it holds and its row in the
ledger. `DeviceState` is what an emulated device carries from one round to
the next (the server's ledger keeps it). `Traits` is one population
device's draw for one round (fedbench.population), as its train message
carries it to the client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A fleet's profile names that are not files in fedbench/device_profiles/: this machine
# itself, measured by wall clock, and a real device that joins over the network.
HOST = "host"
PHYSICAL = "physical"
EMULATED = "emulated"  # any other name: a device profile, emulated
PROFILELESS: tuple[str, ...] = (HOST, PHYSICAL)


def kind_of(profile: str) -> str:
    """The kind of device a fleet profile name stands for: the meter it gets.

    Decided once, when the fleet is expanded (fedbench.experiment.fleet);
    fedbench.devices.meters.make_meter builds the kind's meter, and every other
    module asks that meter, not the kind.
    """
    return profile if profile in PROFILELESS else EMULATED


@dataclass(frozen=True)
class DeviceSpec:
    index: int
    name: str  # unique in the fleet, e.g. "rpi4-002"
    profile: str  # a name in fedbench/device_profiles/, a profile YAML, "host" or "physical"
    kind: str  # EMULATED, PHYSICAL or HOST (kind_of): the meter the device gets


@dataclass(frozen=True)
class DeviceState:
    """Emulated dynamic state carried between rounds (kept in the server's ledger).

    `time_s` is the virtual time at which `temp_c` and `battery_pct` held.
    """

    temp_c: float
    battery_pct: float
    time_s: float


@dataclass(frozen=True)
class Traits:
    """One device's draw for one round (its link jittered for the round)."""

    speed: float  # compute-speed factor relative to the profile
    down_mbps: float
    up_mbps: float
    rtt_ms: float
    capacity_wh: float  # NaN: no battery
    cellular: bool

    @property
    def has_battery(self) -> bool:
        return not math.isnan(self.capacity_wh)
