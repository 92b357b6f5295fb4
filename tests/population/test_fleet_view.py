"""The server's view of a drawn population: predictions, availability and batteries."""

from __future__ import annotations

import numpy as np
import pytest

import fedbench.population.draw as draw_module
from fedbench.core.device import DeviceState
from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import Ledger
from fedbench.models import build_model
from fedbench.population.windows import Windows
from fedbench.scenarios.daily import DailyScenario
from fedbench.server.fleet_view import FleetView
from tests.bad_inputs import _typed


def _view(*overrides: str) -> tuple[FleetView, Ledger]:
    experiment = _typed(["fleet=phones_100", "+fleet.scale=1000", *overrides])
    devices = expand_fleet(experiment.fleet)  # type: ignore[attr-defined]
    ledger = Ledger(devices)
    view = FleetView(devices, experiment)  # type: ignore[arg-type]
    model, _ = build_model("small_cnn")
    scenario = DailyScenario(days=1, new_samples_per_day=48)
    view.predict(ledger, model, experiment, scenario, None)  # type: ignore[arg-type]
    return view, ledger


def test_a_thousand_default_phones_have_hundreds_of_distinct_round_latencies() -> None:
    view, ledger = _view()
    assert len(ledger) == 1000
    assert len(np.unique(ledger.pred_latency_s)) >= 900
    assert len(np.unique(np.round(ledger.pred_comm_s, 9))) >= 900
    # Without a population they are clones of their 8 profiles (the 6 values).
    _, clones = _view("fleet.population=null")
    assert len(np.unique(clones.pred_latency_s)) <= 8
    # Every device starts from its drawn battery level, not a full one.
    assert view.population is not None
    assert np.array_equal(ledger.battery_pct, view.population.battery0_pct)


def test_availability_is_each_devices_windows_and_a_battery_floor() -> None:
    view, ledger = _view()
    pop = view.population
    assert pop is not None
    at_3am = 3 * 3600.0
    view.update_availability(ledger, at_3am)
    assert np.array_equal(ledger.available, pop.windows.inside(at_3am))
    # A device whose battery is below the floor is not picked, even in its window.
    view.update_availability(ledger, 86_400 + 12 * 3600.0)
    ledger.battery_pct[:10] = 5.0
    in_window = pop.windows.inside(86_400 + 12.5 * 3600.0)
    view.update_availability(ledger, 86_400 + 12.5 * 3600.0)
    assert not ledger.available[:10].any()
    assert view.low_battery >= int(in_window[:10].sum())
    # The clock moved every battery to the round's start.
    assert np.all(ledger.battery_time_s == 86_400 + 12.5 * 3600.0)


def test_traits_carry_the_devices_draw_with_a_rounds_jitter() -> None:
    view, _ = _view()
    pop = view.population
    assert pop is not None
    a, b = view.traits(1, 5), view.traits(2, 5)
    assert a is not None and b is not None
    assert a.speed == b.speed == pop.speed[5]
    assert a.down_mbps != b.down_mbps  # jittered per round around the device's own
    assert view.traits(1, 5) == a  # and the same for the same round


def test_idle_drain_starts_where_training_ended_not_at_the_rounds_start() -> None:
    view, ledger = _view()
    pop = view.population
    assert pop is not None
    noon, hour = 12 * 3600.0, 3600.0
    view.update_availability(ledger, noon)
    # A phone on battery from noon to one o'clock: no window edge to charge it between.
    quiet = (
        (pop.windows.next_edge(np.full(len(ledger), noon)) > noon + hour)
        & ~pop.windows.charging_at(np.full(len(ledger), noon))
        & (pop.capacity_wh > 0)
    )
    i = int(np.flatnonzero(quiet)[0])
    after = float(ledger.battery_pct[i]) - 1.0  # the round's energy, as the device reports it
    ledger.set_state(i, DeviceState(30.0, after, noon + 600.0))  # trained until 12:10
    view.update_availability(ledger, noon + hour)
    idle_pct = 100.0 * pop.idle_w[i] * (hour - 600.0) / (pop.capacity_wh[i] * 3600.0)
    assert idle_pct > 0
    assert np.isclose(ledger.battery_pct[i], after - idle_pct)  # 50 idle minutes, not 60


def test_a_rounds_link_jitter_is_per_device_and_drawn_only_for_the_devices_asked() -> None:
    view, _ = _view()
    pop = view.population
    assert pop is not None
    some = np.array([3, 7, 11])
    alone = [pop.link(4, np.array([i])) for i in some]
    together = pop.link(4, some)
    for k, one in enumerate(alone):  # device i's jitter does not depend on who else is asked
        assert [float(c[0]) for c in one] == [float(c[k]) for c in together]
    # O(devices asked): an index far past any fleet still has its own draw, so no
    # fleet-sized array is drawn behind it.
    far = np.array([10**9, 10**9 + 1])
    normals = draw_module._normals(draw_module._key(pop.seed, 7, 4), far, 3)
    assert normals.shape == (3, 2) and np.isfinite(normals).all()
    # Lognormal jitter with the configured sigma, centred on the device's own link.
    many = draw_module._normals(draw_module._key(pop.seed, 7, 4), np.arange(200_000), 3)
    assert abs(float(many.mean())) < 0.01 and abs(float(many.std()) - 1.0) < 0.01
    down, _, _ = pop.link(5, np.arange(len(pop)))
    has = np.isfinite(pop.down_mbps) & (pop.down_mbps > 0)
    ratio = np.log(down[has] / pop.down_mbps[has])
    assert abs(float(ratio.std()) - pop.jitter) < 0.5 * pop.jitter


def test_the_windows_first_read_is_start_up_and_round_one_rereads_no_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one read of every window row happens before the first round (issue 24: it
    was 0.4-1.4 s of round 1's server time at 1,000,000 devices), and it changes nothing."""
    view, ledger = _view()
    plain, plain_ledger = _view()
    read: list[int] = []
    state_of = Windows.state_of

    def counting(self: Windows, devices: np.ndarray, t_s: np.ndarray) -> tuple[np.ndarray, ...]:
        read.append(len(devices))
        return state_of(self, devices, t_s)

    monkeypatch.setattr(Windows, "state_of", counting)
    view.start_windows(ledger)
    assert sum(read) == len(ledger)  # every device, once
    read.clear()
    view.update_availability(ledger, 0.0)
    assert sum(read) == 0  # round 1 at the run's start: nothing stale
    plain.update_availability(plain_ledger, 0.0)  # no start-up read: round 1 reads them all
    assert sum(read) >= len(ledger)
    assert np.array_equal(ledger.available, plain_ledger.available)
    assert np.array_equal(ledger.battery_pct, plain_ledger.battery_pct)
    later = 86_400 + 9 * 3600.0
    view.update_availability(ledger, later)
    plain.update_availability(plain_ledger, later)
    assert np.array_equal(ledger.available, plain_ledger.available)
    assert np.array_equal(ledger.battery_pct, plain_ledger.battery_pct)
