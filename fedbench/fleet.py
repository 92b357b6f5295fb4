"""The fleet: which devices take part, and which profile each one has.

`fleet.devices` is a list of groups `{profile: NAME, count: N}`; the fleet
is their expansion, in order, to one `DeviceSpec` per device. A device's
index is its Flower partition id in simulation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from fedbench.errors import FedbenchError

# Keys a fleet config may have (conf/fleet/*.yaml).
FLEET_KEYS = frozenset({"name", "devices", "scale", "knobs", "faults"})


@dataclass(frozen=True)
class DeviceSpec:
    index: int
    name: str  # unique in the fleet, e.g. "rpi4-002"
    profile: str  # a name in device_profiles/, or "host" (measured by wall clock)


def expand_fleet(fleet: Mapping[str, Any]) -> tuple[DeviceSpec, ...]:
    """Expand `fleet.devices` groups into devices; `fleet.scale` resizes the fleet.

    Scaling keeps each profile's share of the fleet (largest remainders get
    the leftover devices), so `fleet=phones_100 fleet.scale=10000` is the same
    mix at 100x.
    """
    unknown = set(fleet) - FLEET_KEYS
    if unknown:
        raise FedbenchError(
            f"fleet has unknown key(s) {sorted(unknown)}; valid: {', '.join(sorted(FLEET_KEYS))}"
        )
    groups = fleet.get("devices")
    if not isinstance(groups, Sequence) or not groups:
        raise FedbenchError("fleet.devices must be a non-empty list of {profile, count}")
    counts: list[tuple[str, int]] = []
    for i, group in enumerate(groups):
        if not isinstance(group, Mapping) or "profile" not in group:
            raise FedbenchError(f"fleet.devices[{i}] needs a 'profile' key, got {group!r}")
        unknown = set(group) - {"profile", "count"}
        if unknown:
            raise FedbenchError(
                f"fleet.devices[{i}] has unknown key(s) {sorted(unknown)}; valid: count, profile"
            )
        count = group.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FedbenchError(
                f"fleet.devices[{i}].count must be a positive integer, got {count!r}"
            )
        counts.append((str(group["profile"]), count))
    scale = fleet.get("scale")
    if scale is not None:
        counts = _scaled(counts, scale)
    devices: list[DeviceSpec] = []
    seen: dict[str, int] = {}
    for profile, count in counts:
        # A profile given as a file path names its devices by the file's stem.
        stem = PurePath(profile).stem if profile.endswith((".yaml", ".yml")) else profile
        for _ in range(count):
            k = seen.get(stem, 0)
            seen[stem] = k + 1
            devices.append(DeviceSpec(len(devices), f"{stem}-{k:03d}", profile))
    return tuple(devices)


def _scaled(counts: list[tuple[str, int]], scale: object) -> list[tuple[str, int]]:
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < len(counts):
        raise FedbenchError(
            f"fleet.scale must be an integer >= the number of groups ({len(counts)}), got {scale!r}"
        )
    total = sum(c for _, c in counts)
    exact = [c * scale / total for _, c in counts]
    floors = [max(1, int(x)) for x in exact]
    leftover = scale - sum(floors)
    order = sorted(range(len(counts)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in order[: max(0, leftover)]:
        floors[i] += 1
    return [(p, n) for (p, _), n in zip(counts, floors, strict=True)]
