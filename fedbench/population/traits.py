"""What one device of a population is, as its train message carries it to the client."""

from __future__ import annotations

import math
from dataclasses import dataclass


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
