"""One population device's cost: its profile's emulation, made its own.

The emulator costs the round on the device's profile; an emulated meter's
`varied(traits)` (fedbench.devices.emulated_meter.VariedMeter) then applies
what the population drew for this device (fedbench.core.device.Traits,
drawn by fedbench.population), with these functions, where the emulator's
Cost comes out:

- compute: latency / speed. A slower unit of the same model (silicon bin,
  cooling, a training process in the background) runs the same work longer
  at the profile's power, so energy scales with the time: energy / speed;
- communication: the model down and up over the device's own link (this
  round's jittered bandwidth and RTT), and the radio's energy for it with
  the power model of Huang et al., "A Close Examination of Performance and
  Power Characteristics of 4G LTE Networks" (MobiSys 2012; its LTE and
  Wi-Fi power-model parameters):
  P = alpha_u * up_mbps + alpha_d * down_mbps + beta while transferring;
- battery: the level the round starts at (the server's, carried in the
  task) less the training and radio energy over the device's own capacity.
  A battery that cannot supply the round drops the device (status dropped).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TypeVar

import numpy as np

from fedbench.core.device import Traits
from fedbench.core.meter import Cost

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


def vary(cost: Cost, traits: Traits, job_now_s: float, start_pct: float, model_bytes: int) -> Cost:
    """The profile's cost as this device's (module docstring)."""
    comm = comm_s(traits, model_bytes)
    radio = comm_energy_j(traits, model_bytes)
    extra = {**cost.extra, "comm_energy_j": radio, "battery_pct_start": start_pct}
    if cost.status != "ok":
        return dataclasses.replace(cost, comm_s=comm, extra=extra)
    latency = cost.latency_s / traits.speed
    energy = cost.energy_j / traits.speed
    battery = cost.battery_pct
    if traits.has_battery and not math.isnan(start_pct):
        battery = start_pct - 100.0 * (energy + radio) / (traits.capacity_wh * 3600.0)
        if battery < 0.0:
            return dataclasses.replace(
                cost,
                status="dropped",
                reason=f"battery at {start_pct:.1f}% cannot supply {energy + radio:.0f} J",
                latency_s=math.nan,
                energy_j=math.nan,
                avg_power_w=math.nan,
                battery_pct=start_pct,
                comm_s=comm,
                state_after=None,
                extra=extra,
            )
    state = cost.state_after
    if state is not None:
        state = dataclasses.replace(state, battery_pct=battery, time_s=job_now_s + latency)
    return dataclasses.replace(
        cost,
        latency_s=latency,
        energy_j=energy,
        comm_s=comm,
        battery_pct=battery,
        state_after=state,
        extra=extra,
    )
