"""Which meter a device gets: the one place that maps a device's kind to a meter.

"host" is this machine measured by wall clock only (HostMeter); "physical"
is a fleet slot for a real device that joins over the network and measures
itself with its probe (ProbeMeter); any other profile name is a device
profile, emulated (EmulatedMeter). The kind is decided once, when the fleet
is expanded (fedbench.core.device.kind_of); `make_meter` builds its meter,
and every other module asks the meter (fedbench.core.meter.Meter), never the
kind.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fedbench.core.device import EMULATED, HOST, PHYSICAL, PROFILELESS, DeviceSpec, kind_of
from fedbench.core.meter import Meter
from fedbench.devices.meter import HostMeter

if TYPE_CHECKING:
    from fedbench.devices.profile import DeviceProfile

__all__ = ["EMULATED", "HOST", "PHYSICAL", "PROFILELESS", "kind_of", "make_meter", "profile_of"]


def make_meter(
    spec: DeviceSpec, knobs: Mapping[str, Any] | None = None, optimizer: str = "sgd_momentum"
) -> Meter:
    """The whole meter of `spec`'s kind: its profile, the fleet's knobs, the training's optimizer.

    `optimizer` is the key (fedbench.measure.step.OPTIMIZERS) workloads are
    measured with: the one that trains. Meters hold no per-round state, so
    devices of one profile share one.
    """
    return _meter(spec.kind, spec.profile, json.dumps(dict(knobs or {}), sort_keys=True), optimizer)


def profile_of(spec: DeviceSpec) -> DeviceProfile | None:
    """The profile an emulated device's costs come from; None for one that measures its own."""
    if spec.kind != EMULATED:
        return None
    from fedbench.devices.profile import load_profile

    return load_profile(spec.profile)


@functools.lru_cache(maxsize=64)
def _meter(kind: str, profile: str, knobs_json: str, optimizer: str) -> Meter:
    return _BUILDERS[kind](profile, json.loads(knobs_json), optimizer)


def _host(profile: str, knobs: Mapping[str, Any], optimizer: str) -> Meter:
    meter = HostMeter()
    meter.optimizer = optimizer
    return meter


def _physical(profile: str, knobs: Mapping[str, Any], optimizer: str) -> Meter:
    from fedbench.devices.probe_meter import ProbeMeter

    meter = ProbeMeter()
    meter.optimizer = optimizer
    return meter


def _emulated(profile: str, knobs: Mapping[str, Any], optimizer: str) -> Meter:
    # Imported here: the emulator pulls in the profile loader and workload
    # measurement, which a host-only run never needs.
    from fedbench.devices.emulated_meter import EmulatedMeter
    from fedbench.devices.profile import load_profile

    return EmulatedMeter.from_config(load_profile(profile), knobs, optimizer)


_BUILDERS: dict[str, Callable[[str, Mapping[str, Any], str], Meter]] = {
    HOST: _host,
    PHYSICAL: _physical,
    EMULATED: _emulated,
}
