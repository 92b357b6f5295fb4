"""Communication time and daily availability of a device.

Virtual time 0 is midnight of day 0; a profile's `availability.hours` lists
[start, end) hour ranges of each day (start > end wraps past midnight, e.g.
[22, 7] for a phone charging overnight; [0, 24] for always).
"""

from __future__ import annotations

from fedbench.devices.profile import DeviceProfile

DAY_S = 86_400.0


def comm_time_s(profile: DeviceProfile, model_bytes: int) -> float:
    """Download then upload the model: two transfers, each one round trip of set-up."""
    bits = 8.0 * model_bytes
    net = profile.network
    return bits / (net.down_mbps * 1e6) + bits / (net.up_mbps * 1e6) + 2 * net.rtt_ms / 1000.0


def is_available(profile: DeviceProfile, virtual_time_s: float) -> bool:
    hour = (virtual_time_s % DAY_S) / 3600.0
    for start, end in profile.availability.hours:
        inside = start <= hour < end if start < end else (hour >= start or hour < end)
        if inside:
            return True
    return False
