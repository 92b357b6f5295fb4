"""One population device as its own unit of its profile: the emulator's inputs, varied.

What the population drew for a device (fedbench.core.device.Traits, drawn
by fedbench.population) enters the cost model, not its result: an emulated
meter's `varied(traits)` (fedbench.devices.emulated_meter.VariedMeter)
emulates the round once, with

- compute: the profile's steps at the device's `speed`
  (fedbench.devices.step.slowed): a slower unit of the same model (silicon
  bin, cooling, a training process in the background) runs the same work
  longer at the profile's power. The thermal model integrates the longer
  busy time, so a slow unit heats further, may cross a trip a nominal one
  never reaches and then runs throttled (clock, time and energy of the
  capped DVFS step); the memory-pressure clock sees its later steps;
- communication: `varied_profile` gives the profile the device's own link
  (this round's jittered bandwidth and RTT), and the radio's energy for the
  model down and up with the power model of Huang et al., "A Close
  Examination of Performance and Power Characteristics of 4G LTE Networks"
  (MobiSys 2012; its LTE and Wi-Fi power-model parameters):
  P = alpha_u * up_mbps + alpha_d * down_mbps + beta while transferring;
- battery: `varied_profile` gives the profile the device's own capacity
  (none: a board on mains); the emulator drains it from the level the
  round starts at (the server's, carried in the task) by the training and
  radio energy, and drops the device (status dropped, nothing trained)
  where it cannot supply them.

The server (fedbench.server.fleet_view) predicts a 100,000-device population
from one emulation per profile, spread over the devices by speed and their
own links (`link_s`, vectorised). That spread is exact while the slowed
round stays below the profile's first thermal trip (time and energy are
then linear in 1 / speed); a unit slow enough to cross a trip the nominal
round does not runs throttled, which the spread leaves out.
tests/population/test_varied_physics.py measures that gap on the default
phone population.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import numpy as np

from fedbench.core.device import Traits
from fedbench.devices.profile import Battery, DeviceProfile, Network

Link = TypeVar("Link", float, np.ndarray)

# Huang et al. 2012, power-model parameters: alpha_u, alpha_d in mW per Mbit/s, beta in mW.
RADIO_MW: dict[bool, tuple[float, float, float]] = {
    True: (438.39, 51.97, 1288.04),  # LTE (cellular)
    False: (283.17, 137.01, 132.86),  # Wi-Fi
}


def link_s(down_mbps: Link, up_mbps: Link, rtt_ms: Link, model_bytes: int) -> Link:
    """Download then upload the model over a link: one RTT of set-up each (arrays: many)."""
    bits = 8.0 * model_bytes
    return bits / (down_mbps * 1e6) + bits / (up_mbps * 1e6) + 2 * rtt_ms / 1e3


def comm_s(traits: Traits, model_bytes: int) -> float:
    """Download then upload the model over the device's own link this round."""
    return link_s(traits.down_mbps, traits.up_mbps, traits.rtt_ms, model_bytes)


def comm_energy_j(traits: Traits, model_bytes: int) -> float:
    """Radio energy of those two transfers (the RTTs at the radio's base power)."""
    return float(
        radio_energy_j(
            np.array([traits.down_mbps]),
            np.array([traits.up_mbps]),
            np.array([traits.rtt_ms]),
            np.array([traits.cellular]),
            model_bytes,
        )[0]
    )


def radio_energy_j(
    down_mbps: np.ndarray,
    up_mbps: np.ndarray,
    rtt_ms: np.ndarray,
    cellular: np.ndarray,
    model_bytes: int,
) -> np.ndarray:
    """comm_energy_j for many devices at once (their links as columns)."""
    params = np.array([RADIO_MW[False], RADIO_MW[True]])[np.asarray(cellular, dtype=int)]
    alpha_u, alpha_d, beta = params[:, 0], params[:, 1], params[:, 2]
    bits = 8.0 * model_bytes
    down_s, up_s = bits / (down_mbps * 1e6), bits / (up_mbps * 1e6)
    mw = (
        (beta + alpha_d * down_mbps) * down_s
        + (beta + alpha_u * up_mbps) * up_s
        + beta * 2 * rtt_ms / 1e3
    )
    return mw / 1e3


def varied_profile(profile: DeviceProfile, traits: Traits) -> DeviceProfile:
    """The profile as this device: its own link this round and its own battery capacity."""
    network = Network(up_mbps=traits.up_mbps, down_mbps=traits.down_mbps, rtt_ms=traits.rtt_ms)
    battery = Battery(traits.capacity_wh if traits.has_battery else None)
    return dataclasses.replace(profile, network=network, battery=battery)
