"""Ten virtual days of a phone population: batteries fall while training, recover while
charging, and some devices are unavailable for low battery; battery-aware strategies act.

The rounds go through the server's own pieces - FleetView.update_availability
(the AvailabilityHook), each picked device's own meter (its profile's meter,
`varied` by its draw: the emulator on its speed, link and battery) and
Ledger.set_state (the LedgerHook) - with a long round (~15 min of lenet
steps on a nominal phone), so ten days take seconds instead of a Flower run.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.core.device import DeviceState
from fedbench.core.meter import TrainJob
from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import Ledger
from fedbench.models import build_model
from fedbench.scenarios.daily import DailyScenario
from fedbench.server.fleet_view import FleetView
from strategies.eafl import EAFL
from strategies.heteroaware import HeteroAware
from tests.bad_inputs import _typed

H = 3600.0
DAY = 24 * H
STEPS = 40_000  # of lenet at batch 32: ~15 min on a nominal phone, a DenseNet-sized round
MODEL, _ = build_model("lenet")


def _fleet(n: int) -> tuple[FleetView, Ledger]:
    experiment = _typed(["fleet=phones_100", f"+fleet.scale={n}", "seed=3"])
    devices = expand_fleet(experiment.fleet)  # type: ignore[attr-defined]
    ledger = Ledger(devices)
    view = FleetView(devices, experiment)  # type: ignore[arg-type]
    model, _ = build_model("small_cnn")
    view.predict(ledger, model, experiment, DailyScenario(1, 48), None)  # type: ignore[arg-type]
    return view, ledger


def _train(view: FleetView, ledger: Ledger, server_round: int, now_s: float, picked: np.ndarray):
    """Each picked device's round as its meter costs it; the ledger takes the state after."""
    before, after = [], []
    for i in picked:
        traits = view.traits(server_round, int(i))
        assert traits is not None
        start = float(ledger.battery_pct[i])
        meter = view.meters[view.names[view.code[i]]].varied(traits)
        state = DeviceState(30.0, start, now_s)
        job = TrainJob("lenet", (1, 28, 28), (32,) * STEPS, 4_000_000, now_s, state)
        cost = meter.predict(MODEL, job)
        assert cost is not None
        if cost.state_after is not None:
            ledger.set_state(int(i), cost.state_after)
        before.append(start)
        after.append(cost.battery_pct)
    return np.array(before), np.array(after)


def test_ten_days_batteries_fall_training_recover_charging_and_run_low() -> None:
    view, ledger = _fleet(400)
    pop = view.population
    assert pop is not None
    rng = np.random.default_rng(0)
    low_battery, fell, rose = [], 0, 0
    lowest = 100.0  # the lowest battery in the day sessions, after their rounds
    server_round = 0
    for day in range(10):
        for hour in (12.5, 18.0):  # day sessions: on battery
            server_round += 1
            now = day * DAY + hour * H
            view.update_availability(ledger, now)
            low_battery.append(view.low_battery)
            available = np.flatnonzero(ledger.available)
            picked = rng.choice(available, min(30, len(available)), replace=False)
            before, after = _train(view, ledger, server_round, now, picked)
            assert np.all(after < before)  # training and the radio drain the battery
            fell += len(picked)
            lowest = min(lowest, float(np.nanmin(ledger.battery_pct)))
        # Overnight: every device that charges from 23:00 to 05:00 ends higher (or full).
        night0, night1 = day * DAY + 23 * H, (day + 1) * DAY + 5 * H
        view.update_availability(ledger, night0)
        evening = ledger.battery_pct.copy()
        view.update_availability(ledger, night1)
        charging = _charging_throughout(view, night0, night1)
        assert charging.sum() > 50
        assert np.all(ledger.battery_pct[charging] >= evening[charging])
        assert np.all(
            (ledger.battery_pct[charging] > evening[charging] + 1)
            | (ledger.battery_pct[charging] == 100.0)
        )
        rose += int((ledger.battery_pct[charging] > evening[charging]).sum())
    assert fell >= 300 and rose >= 300, (fell, rose)
    # Idle drain and training take some devices below the floor in their day sessions
    # (at 05:00, after a night's charging, every phone is well above it).
    assert sum(low_battery) > 0
    assert lowest < pop.floor_pct, lowest


def _charging_throughout(view: FleetView, t0: float, t1: float) -> np.ndarray:
    pop = view.population
    assert pop is not None
    times = np.linspace(t0, t1, 25)
    return np.all([pop.windows.charging_at(t) for t in times], axis=0)


@pytest.fixture(scope="module")
def evening() -> Ledger:
    """The population at 18:00 on day 2: batteries spread by two days of idle and charging."""
    view, ledger = _fleet(600)
    view.update_availability(ledger, 2 * DAY + 18 * H)
    ledger.available[:] = True  # compare the strategies on everyone
    return ledger


def _picks(strategy: EAFL | HeteroAware, ledger: Ledger) -> np.ndarray:
    return strategy.select(ledger, 3, 2 * DAY + 18 * H)


def test_eafls_battery_term_changes_who_is_picked(evening: Ledger) -> None:
    ledger = evening
    spread = np.nanpercentile(ledger.battery_pct, [10, 90])
    assert spread[1] - spread[0] > 30  # batteries that differ: something to act on
    with_battery = _picks(EAFL(40, seed=1, utility_weight=0.2, battery_floor_pct=0.0), ledger)
    without = _picks(EAFL(40, seed=1, utility_weight=1.0, battery_floor_pct=0.0), ledger)
    assert set(with_battery) != set(without)
    assert ledger.battery_pct[with_battery].mean() > ledger.battery_pct[without].mean() + 5
    # The floor: nobody below it is picked.
    floored = _picks(EAFL(40, seed=1, battery_floor_pct=50.0), ledger)
    assert np.all(ledger.battery_pct[floored] >= 50.0)


def test_heteroawares_battery_terms_change_who_is_picked(evening: Ledger) -> None:
    ledger = evening
    # Nobody has been picked yet, so all 40 places are drawn ~ 1 / cost: one draw of 40 is
    # noisy, so the battery term's pull is averaged over five seeds (each ~+3..+5 points).
    gaps = []
    for seed in range(1, 6):
        weighted = _picks(HeteroAware(40, seed, battery_weight=5.0, battery_floor_pct=0), ledger)
        blind = _picks(HeteroAware(40, seed, battery_weight=0.0, battery_floor_pct=0), ledger)
        assert set(weighted) != set(blind)
        gaps.append(ledger.battery_pct[weighted].mean() - ledger.battery_pct[blind].mean())
    assert np.mean(gaps) > 3, gaps
    floored = _picks(HeteroAware(40, seed=1, battery_floor_pct=50.0), ledger)
    assert np.all(ledger.battery_pct[floored] >= 50.0)
