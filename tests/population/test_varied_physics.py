"""A population device is emulated as its own unit (fedbench.devices.variation): its speed,
link and battery are inputs of the cost model, not a scaling of the profile's result."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fedbench.core.device import DeviceState, Traits
from fedbench.core.meter import TrainJob
from fedbench.devices.emulated_meter import EmulatedMeter
from fedbench.devices.meters import make_meter
from fedbench.devices.variation import comm_energy_j, comm_s
from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import Ledger
from fedbench.models import build_model
from fedbench.scenarios.daily import DailyScenario
from fedbench.server.fleet_view import FleetView
from fedbench.train.loop import step_sizes
from fedbench.train.round_plan import plan_round
from tests.bad_inputs import _typed

NO_BATTERY = math.nan
THIRD = 1.0 / 3.0


def _meter(profile: str) -> EmulatedMeter:
    meter = make_meter(expand_fleet({"devices": [{"profile": profile, "count": 1}]})[0])
    assert isinstance(meter, EmulatedMeter)
    return meter


def _lenet(steps: int, state: DeviceState | None = None) -> TrainJob:
    return TrainJob("lenet", (1, 28, 28), (32,) * steps, 250_000, 0.0, state)


def test_a_slow_unit_heats_for_longer_and_throttles_where_the_scaled_round_did_not() -> None:
    """An rpi4 (trip at 80 C, tau 180 s) training lenet for ~4 min stays under its trip;
    a unit at a third of the speed runs the same steps for ~13 min at the same power, crosses
    the trip and runs the rest at the capped clock. Dividing the nominal result by the
    speed (the old VariedMeter) kept the nominal temperature and no throttling."""
    meter = _meter("rpi4")
    model, _ = build_model("lenet")
    # ~4 min: 75.8 C at the end with the refitted constants (trip 80 C); at a third of
    # the speed the unit crosses the trip and hovers there, 14% of its round throttled.
    # (9,500 steps end at 78.1 C with the constants fitted in cdbdf04: too close to the
    # trip for the slow unit, hovering between 78 and 80 C, to end 1 C above it.)
    job = _lenet(8_000)
    base = meter.predict(model, job)
    slow = meter.varied(Traits(THIRD, 20.0, 5.0, 40.0, NO_BATTERY, False)).predict(model, job)
    assert base is not None and slow is not None
    trip = meter.profile.thermal.trips[0].temp_c
    assert base.status == slow.status == "ok"
    assert base.throttled_frac == 0.0 and base.temp_c_end < trip - 1.0
    assert slow.throttled_frac > 0.1
    assert slow.temp_c_end > base.temp_c_end + 1.0  # it ran on, hovering at its trip
    assert slow.freq_ghz_avg < base.freq_ghz_avg  # the DVFS cap, in the average clock
    # Throttled steps are slower still than the nominal ones stretched by 1 / speed.
    assert slow.latency_s > 1.02 * base.latency_s / THIRD
    assert slow.state_after is not None and slow.state_after.temp_c == slow.temp_c_end
    # A short round stays linear: below every trip, speed only stretches time and energy.
    short = _lenet(100)
    b, s = (
        meter.predict(model, short),
        meter.varied(Traits(0.5, 20.0, 5.0, 40.0, NO_BATTERY, False)).predict(model, short),
    )
    assert b is not None and s is not None and b.throttled_frac == s.throttled_frac == 0.0
    assert s.latency_s == pytest.approx(b.latency_s / 0.5)
    assert s.energy_j == pytest.approx(b.energy_j / 0.5)
    assert s.avg_power_w == pytest.approx(b.avg_power_w)


def test_the_battery_is_the_devices_own_and_a_battery_that_cannot_supply_trains_nothing() -> None:
    meter = _meter("samsung_s8plus")  # the profile's battery: 13.5 Wh
    model, _ = build_model("lenet")
    job = _lenet(3000, DeviceState(25.0, 5.0, 0.0))  # ~240 J of training, from 5%

    def traits(capacity_wh: float) -> Traits:
        return Traits(1.0, 20.0, 5.0, 40.0, capacity_wh, True)

    radio = comm_energy_j(traits(1.0), job.model_bytes)
    trained: list[str] = []

    def train() -> float:
        trained.append("trained")
        return 0.5

    own = meter.varied(traits(13.5))
    loss, cost = own.measure(model, job, train)
    assert loss == 0.5 and cost.status == "ok" and trained == ["trained"]
    drawn = cost.energy_j + radio
    assert cost.battery_pct == pytest.approx(5.0 - 100.0 * drawn / (13.5 * 3600.0))
    assert cost.state_after is not None and cost.state_after.battery_pct == cost.battery_pct
    assert cost.comm_s == pytest.approx(comm_s(traits(13.5), job.model_bytes))
    assert cost.extra["comm_energy_j"] == radio and cost.extra["battery_pct_start"] == 5.0
    # A worn 1 Wh battery at 5% holds 180 J: the emulator drops the device before it
    # trains (the old scaling dropped it only after the host had trained).
    worn = meter.varied(traits(1.0))
    loss, cost = worn.measure(model, job, train)
    assert cost.status == "dropped" and loss is None and trained == ["trained"]
    assert "battery at 5.0% cannot supply" in cost.reason and cost.battery_pct == 5.0
    # The same device with the profile's battery would have trained: it is the draw's.
    assert meter.predict(model, job) is not None
    assert meter.predict(model, job).status == "ok"  # type: ignore[union-attr]


def test_the_servers_spread_is_each_devices_own_emulation_for_the_default_population() -> None:
    """FleetView predicts 100 phones from one emulation per profile, spread by speed and
    link; each device's own emulation (VariedMeter) gives the same figures while no round
    crosses a thermal trip, which the default experiment's rounds do not."""
    experiment = _typed(["fleet=phones_100", "seed=3"])
    devices = expand_fleet(experiment.fleet)  # type: ignore[attr-defined]
    ledger = Ledger(devices)
    view = FleetView(devices, experiment)  # type: ignore[arg-type]
    model, _ = build_model("small_cnn")
    scenario = DailyScenario(1, 48)
    view.predict(ledger, model, experiment, scenario, None)  # type: ignore[arg-type]
    pop = view.population
    assert pop is not None
    train = experiment.train  # type: ignore[attr-defined]
    shape = experiment.model.input_shape  # type: ignore[attr-defined]
    model_bytes = sum(v.numel() * v.element_size() for v in model.state_dict().values())
    gaps = []
    for name, idx in view.groups.items():
        meter = view.meters[name]
        examples = scenario.expected_examples_of(None, idx)  # type: ignore[arg-type]
        for k, i in enumerate(idx):
            sizes = step_sizes(max(int(examples[k]), 1), train.batch_size, train.local_epochs)
            job = TrainJob(experiment.model.name, shape, sizes, model_bytes, 0.0, None)  # type: ignore[attr-defined]
            job = plan_round(model, job, meter, train.memory_planner).job
            traits = Traits(
                float(pop.speed[i]),
                float(pop.down_mbps[i]),
                float(pop.up_mbps[i]),
                float(pop.rtt_ms[i]),
                float(pop.capacity_wh[i]),
                bool(pop.cellular[i]),
            )
            own = meter.varied(traits).predict(model, job)
            assert own is not None and own.status == "ok" and own.throttled_frac == 0.0
            assert ledger.pred_comm_s[i] == pytest.approx(own.comm_s)
            gaps.append(
                (
                    ledger.pred_latency_s[i] / own.latency_s - 1.0,
                    ledger.pred_energy_j[i] / own.energy_j - 1.0,
                )
            )
    worst = np.abs(np.array(gaps)).max(axis=0)
    assert len(gaps) == 100 and np.all(worst < 1e-6), worst


def test_a_population_devices_profile_is_its_own_link_and_battery() -> None:
    meter = _meter("pixel2")
    mine = meter.varied(Traits(0.8, 7.0, 2.0, 90.0, 2.5, True))
    assert mine.profile.network.down_mbps == 7.0 and mine.profile.network.rtt_ms == 90.0
    assert mine.profile.battery.capacity_wh == 2.5 and mine.speed == 0.8
    board = _meter("rpi4").varied(Traits(1.2, 50.0, 50.0, 5.0, NO_BATTERY, False))
    assert board.profile.battery.capacity_wh is None
    # The rest of the profile is the model's: clusters, thermals, memory.
    assert (
        dataclasses.replace(
            mine.profile, network=meter.profile.network, battery=meter.profile.battery
        )
        == meter.profile
    )
