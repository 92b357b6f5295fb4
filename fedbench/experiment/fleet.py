"""The fleet: which devices take part, and which profile each one has.

`fleet.devices` is a list of groups `{profile: NAME, count: N}`; the fleet
is their expansion, in order, to one `DeviceSpec` per device (the typed
config is fedbench.experiment.FleetConfig). A device's index is its
position: the partition of the data it holds, and its row in the ledger;
its kind (emulated, physical, host) is decided here, once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from fedbench.core.device import DeviceSpec, kind_of
from fedbench.experiment.schema import FleetConfig
from fedbench.experiment.typed import parse


def expand_fleet(fleet: FleetConfig | Mapping[str, Any]) -> tuple[DeviceSpec, ...]:
    """Expand the groups into devices; `fleet.scale` resizes the fleet.

    Scaling keeps each profile's share of the fleet (largest remainders get
    the leftover devices), so `fleet=phones_100 +fleet.scale=10000` is the
    same mix at 100x. A mapping (scripts, tests) is validated as a fleet
    config first.
    """
    if not isinstance(fleet, FleetConfig):
        fleet = parse(FleetConfig, {"name": "fleet", **fleet}, "fleet")
    return _expand(fleet)


@functools.lru_cache(maxsize=8)
def _expand(fleet: FleetConfig) -> tuple[DeviceSpec, ...]:
    counts = [(g.profile, g.count) for g in fleet.devices]
    if fleet.scale is not None:
        counts = _scaled(counts, fleet.scale)
    devices: list[DeviceSpec] = []
    seen: dict[str, int] = {}
    for profile, count in counts:
        # A profile given as a file path names its devices by the file's stem.
        stem = PurePath(profile).stem if profile.endswith((".yaml", ".yml")) else profile
        for _ in range(count):
            k = seen.get(stem, 0)
            seen[stem] = k + 1
            devices.append(DeviceSpec(len(devices), f"{stem}-{k:03d}", profile, kind_of(profile)))
    return tuple(devices)


def by_profile(devices: Iterable[DeviceSpec]) -> dict[str, DeviceSpec]:
    """One device of each profile (its first), in fleet order: whom to ask for the profile's meter.

    Devices of one profile share one meter (fedbench.devices.meters.make_meter).
    """
    first: dict[str, DeviceSpec] = {}
    for d in devices:
        first.setdefault(d.profile, d)
    return first


def _scaled(counts: list[tuple[str, int]], scale: int) -> list[tuple[str, int]]:
    total = sum(c for _, c in counts)
    exact = [c * scale / total for _, c in counts]
    floors = [max(1, int(x)) for x in exact]
    leftover = scale - sum(floors)
    order = sorted(range(len(counts)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in order[: max(0, leftover)]:
        floors[i] += 1
    return [(p, n) for (p, _), n in zip(counts, floors, strict=True)]
