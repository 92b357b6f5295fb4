"""The fleet: which devices take part, and which profile each one has.

`fleet.devices` is a list of groups `{profile: NAME, count: N}`; the fleet
is their expansion, in order, to one `DeviceSpec` per device (the typed
config is fedbench.experiment.FleetConfig). A device's index is its
position: the partition of the data it holds, and its row in the ledger;
its kind (emulated, physical, host) is decided here, once (kind_of).

The expansion is a `Fleet`: the groups as columns, a sequence whose
`DeviceSpec`s are made when asked for. A 1,000,000-device fleet is a few
numbers per group, not a million Python objects: a device's name, index and
profile are arithmetic on its group, in both directions.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, overload

import numpy as np

from fedbench.core.device import DeviceSpec, kind_of
from fedbench.experiment.schema import FleetConfig
from fedbench.experiment.typed import parse


class Fleet(Sequence[DeviceSpec]):
    """The expanded fleet: device i is `DeviceSpec(i, f"{stem}-{k:03d}", profile)` of its group.

    Devices of one stem (a profile's name, or a profile file's stem) are
    numbered across every group of that stem, in fleet order.
    """

    def __init__(self, groups: Sequence[tuple[str, int]]) -> None:
        seen: dict[str, int] = {}
        self.profiles: tuple[str, ...] = tuple(p for p, _ in groups)  # per group
        self.kinds: tuple[str, ...] = tuple(kind_of(p) for p in self.profiles)
        self.counts: tuple[int, ...] = tuple(int(c) for _, c in groups)
        stems, first = [], []
        for profile, count in groups:
            stem = _stem(profile)
            stems.append(stem)
            first.append(seen.get(stem, 0))
            seen[stem] = first[-1] + int(count)
        self.stems: tuple[str, ...] = tuple(stems)
        self.first: tuple[int, ...] = tuple(first)  # per group: its first device's number
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self._of_stem: dict[str, list[int]] = {}
        for g, stem in enumerate(stems):
            self._of_stem.setdefault(stem, []).append(g)

    def __len__(self) -> int:
        return int(self.starts[-1])

    @overload
    def __getitem__(self, i: int) -> DeviceSpec: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[DeviceSpec, ...]: ...
    def __getitem__(self, i: int | slice) -> DeviceSpec | tuple[DeviceSpec, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        n = len(self)
        index = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= index < n:
            raise IndexError(f"device {i} of a fleet of {n}")
        g = self.group_of(index)
        number = self.first[g] + index - int(self.starts[g])
        return DeviceSpec(index, f"{self.stems[g]}-{number:03d}", self.profiles[g], self.kinds[g])

    def __iter__(self) -> Iterator[DeviceSpec]:
        for g, count in enumerate(self.counts):
            start, first = int(self.starts[g]), self.first[g]
            profile, kind = self.profiles[g], self.kinds[g]
            for k in range(count):
                yield DeviceSpec(start + k, f"{self.stems[g]}-{first + k:03d}", profile, kind)

    def __repr__(self) -> str:
        return f"Fleet({len(self)} devices in {len(self.counts)} groups)"

    def group_of(self, index: int) -> int:
        return int(np.searchsorted(self.starts, index, side="right")) - 1

    def index_of(self, name: str) -> int | None:
        """The index of the device called `name`; None if no device of the fleet is."""
        stem, _, number = name.rpartition("-")
        if not number.isdigit():
            return None
        k = int(number)
        if f"{stem}-{k:03d}" != name:  # rpi4-1 and rpi4-0001 are nobody's names
            return None
        for g in self._of_stem.get(stem, ()):
            if self.first[g] <= k < self.first[g] + self.counts[g]:
                return int(self.starts[g]) + k - self.first[g]
        return None

    def names(self, indices: Sequence[int] | np.ndarray) -> list[str]:
        return [self[int(i)].name for i in indices]

    @functools.cached_property
    def profile_names(self) -> tuple[str, ...]:
        """The fleet's profiles, each once, in order of first appearance."""
        return tuple(dict.fromkeys(self.profiles))

    @functools.cached_property
    def profile_code(self) -> np.ndarray:
        """Per device: its profile's position in `profile_names` (int32, one vector op)."""
        codes = [self.profile_names.index(p) for p in self.profiles]
        return np.repeat(np.asarray(codes, dtype=np.int32), self.counts)

    def first_of_each_profile(self) -> dict[str, DeviceSpec]:
        """One device of each profile (its first), in fleet order, from the groups alone."""
        first: dict[str, DeviceSpec] = {}
        for g, profile in enumerate(self.profiles):
            if profile not in first and self.counts[g] > 0:
                first[profile] = self[int(self.starts[g])]
        return first

    def profile_counts(self) -> dict[str, int]:
        """Profile -> how many devices of the fleet have it, in order of first appearance."""
        out: dict[str, int] = {}
        for profile, count in zip(self.profiles, self.counts, strict=True):
            out[profile] = out.get(profile, 0) + count
        return out


def by_profile(devices: Iterable[DeviceSpec]) -> dict[str, DeviceSpec]:
    """One device of each profile (its first), in fleet order: whom to ask for the profile's meter.

    Devices of one profile share one meter (fedbench.devices.meters.make_meter).
    """
    if isinstance(devices, Fleet):
        return devices.first_of_each_profile()
    first: dict[str, DeviceSpec] = {}
    for d in devices:
        first.setdefault(d.profile, d)
    return first


def fleet_index(devices: Sequence[DeviceSpec]) -> Mapping[str, int]:
    """Device name -> index: arithmetic on a `Fleet`, a dict for a hand-made tuple."""
    if isinstance(devices, Fleet):
        return FleetIndex(devices)
    return {d.name: d.index for d in devices}


@dataclass(frozen=True)
class FleetIndex(Mapping[str, int]):
    """A `Fleet`'s name -> index as a read-only mapping, without a dict of every name."""

    fleet: Fleet = field(repr=False)

    def __getitem__(self, name: str) -> int:
        index = self.fleet.index_of(name)
        if index is None:
            raise KeyError(name)
        return index

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.fleet.index_of(name) is not None

    def __iter__(self) -> Iterator[str]:
        return (d.name for d in self.fleet)

    def __len__(self) -> int:
        return len(self.fleet)


def profile_column(devices: Sequence[DeviceSpec]) -> tuple[tuple[str, ...], np.ndarray]:
    """(the profiles, each once in order of appearance; per device the position of its own).

    Vectorised for a `Fleet`; a hand-made tuple of specs is read one by one.
    """
    if isinstance(devices, Fleet):
        return devices.profile_names, devices.profile_code
    names = tuple(dict.fromkeys(d.profile for d in devices))
    code = {p: c for c, p in enumerate(names)}
    return names, np.array([code[d.profile] for d in devices], dtype=np.int32)


def kind_column(devices: Sequence[DeviceSpec]) -> np.ndarray:
    """Per device its kind (kind_of): one vector op for a `Fleet`, read one by one otherwise."""
    if isinstance(devices, Fleet):
        return np.repeat(np.asarray(devices.kinds, dtype=object), devices.counts)
    return np.asarray([d.kind for d in devices], dtype=object)


class DeviceNames(Sequence[str]):
    """The devices' names, made when read (for the rare reader of every name: traces)."""

    def __init__(self, devices: Sequence[DeviceSpec]) -> None:
        self.devices = devices

    def __len__(self) -> int:
        return len(self.devices)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [d.name for d in self.devices[i]]
        return self.devices[i].name


def _stem(profile: str) -> str:
    """A profile given as a file path names its devices by the file's stem."""
    return PurePath(profile).stem if profile.endswith((".yaml", ".yml")) else profile


def expand_fleet(fleet: FleetConfig | Mapping[str, Any]) -> Fleet:
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
def _expand(fleet: FleetConfig) -> Fleet:
    counts = [(g.profile, g.count) for g in fleet.devices]
    if fleet.scale is not None:
        counts = _scaled(counts, fleet.scale)
    return Fleet(counts)


def _scaled(counts: list[tuple[str, int]], scale: int) -> list[tuple[str, int]]:
    total = sum(c for _, c in counts)
    exact = [c * scale / total for _, c in counts]
    floors = [max(1, int(x)) for x in exact]
    leftover = scale - sum(floors)
    order = sorted(range(len(counts)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in order[: max(0, leftover)]:
        floors[i] += 1
    return [(p, n) for (p, _), n in zip(counts, floors, strict=True)]
