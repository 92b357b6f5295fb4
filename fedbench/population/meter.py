"""The meter of one device of a population: its profile's emulation, made its own.

The emulator costs the round on the device's profile (fedbench.devices);
this meter then applies what the population drew for this device
(fedbench.population.traits.Traits), at the seam where the emulator's Cost
comes out:

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

import numpy as np
from torch import nn

from fedbench.core.device import Traits
from fedbench.core.meter import Cost, TrainJob, Watch, WatchJob
from fedbench.devices.emulated_meter import EmulatedMeter

# Huang et al. 2012, power-model parameters: alpha_u, alpha_d in mW per Mbit/s, beta in mW.
RADIO_MW: dict[bool, tuple[float, float, float]] = {
    True: (438.39, 51.97, 1288.04),  # LTE (cellular)
    False: (283.17, 137.01, 132.86),  # Wi-Fi
}


def comm_s(traits: Traits, model_bytes: int) -> float:
    """Download then upload the model over the device's link: one RTT of set-up each."""
    bits = 8.0 * model_bytes
    return bits / (traits.down_mbps * 1e6) + bits / (traits.up_mbps * 1e6) + 2 * traits.rtt_ms / 1e3


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


class VariedMeter(EmulatedMeter):
    """An EmulatedMeter whose costs are one population device's (module docstring)."""

    def __init__(self, meter: EmulatedMeter, traits: Traits) -> None:
        super().__init__(meter.profile, meter.knobs, meter.optimizer)
        self.traits = traits

    def _start_pct(self, state_pct: float | None) -> float:
        if not self.traits.has_battery:
            return math.nan
        return 100.0 if state_pct is None else state_pct  # as profile.initial_state

    def measure(self, model: nn.Module, job: TrainJob, train: object) -> tuple[float | None, Cost]:
        loss, cost = super().measure(model, job, train)  # type: ignore[arg-type]
        start = self._start_pct(job.state.battery_pct if job.state else None)
        cost = vary(cost, self.traits, job.now_s, start, job.model_bytes)
        return (loss if cost.status == "ok" else None), cost

    def watch(self, job: WatchJob) -> Watch:  # type: ignore[override]
        return _VariedWatch(super().watch(job), self, job)


class _VariedWatch(Watch):
    def __init__(self, inner: Watch, meter: VariedMeter, job: WatchJob) -> None:
        self.inner, self.meter, self.job = inner, meter, job

    def __enter__(self) -> _VariedWatch:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def cost(self) -> Cost:
        job = self.job
        start = self.meter._start_pct(job.state.battery_pct if job.state else None)
        return vary(self.inner.cost(), self.meter.traits, job.now_s, start, job.model_bytes)
