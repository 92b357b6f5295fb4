"""Batteries over the virtual clock: idle drain, charging windows, training and radio drain."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedbench.core.device import Traits
from fedbench.population.meter import comm_energy_j, comm_s
from fedbench.population.windows import DAY_S, Cursor, Windows, advance, charging_seconds

H = 3600.0


def _one(start_h: float, hours: float, charging: bool = True) -> Windows:
    return Windows.build(
        1,
        np.array([0]),
        np.array([start_h * H]),
        np.array([hours * H]),
        np.array([charging]),
        np.array([DAY_S]),
        np.array([True]),
    )


def _level(windows: Windows, pct: float, t0_h: float, t1_h: float) -> float:
    out = advance(
        np.array([pct]),
        np.array([t0_h * H]),
        t1_h * H,
        windows,
        idle_w=np.array([0.5]),
        charge_w=np.array([10.0]),
        capacity_wh=np.array([10.0]),
    )
    return float(out[0])


def test_charging_fills_then_idle_drains_exactly_edge_to_edge() -> None:
    night = _one(0.0, 6.0)  # charging 00:00-06:00, 10 W into a 10 Wh battery
    # 50% + 10 W x 0.5 h = full; then 10 idle hours at 0.5 W = 5 Wh = 50%.
    assert _level(night, 50.0, 0.0, 6.0) == pytest.approx(100.0)
    assert _level(night, 50.0, 0.0, 16.0) == pytest.approx(50.0)
    # Idle from 06:00 to 24:00 (18 h x 0.5 W = 9 Wh): 100 -> 10; the next night refills it.
    assert _level(night, 100.0, 6.0, 24.0) == pytest.approx(10.0)
    assert _level(night, 100.0, 6.0, 25.0) == pytest.approx(100.0)
    # Empty stays empty, it does not go below 0.
    assert _level(night, 5.0, 6.0, 23.0) == 0.0


def test_a_window_that_wraps_midnight_charges_on_both_sides() -> None:
    late = _one(22.0, 4.0)  # 22:00-02:00
    assert charging_seconds(late, 0.0, DAY_S)[0] == pytest.approx(4 * H)
    assert charging_seconds(late, 21 * H, 23 * H)[0] == pytest.approx(1 * H)
    assert _level(late, 10.0, 22.0, 23.0) == pytest.approx(100.0)  # 10 Wh in 1 h at 10 W
    assert late.inside(1.5 * H)[0] and late.inside(23 * H)[0] and not late.inside(3 * H)[0]


def test_session_windows_are_available_but_not_charging() -> None:
    session = _one(12.0, 1.0, charging=False)
    assert session.inside(12.5 * H)[0] and not session.charging_at(12.5 * H)[0]
    assert _level(session, 50.0, 12.0, 13.0) == pytest.approx(45.0)  # 0.5 Wh of 10


TRAITS = Traits(
    speed=0.5, down_mbps=20.0, up_mbps=5.0, rtt_ms=40.0, capacity_wh=10.0, cellular=True
)


def test_the_radio_energy_follows_huangs_lte_power_model() -> None:
    model_bytes = 1_000_000
    radio = comm_energy_j(TRAITS, model_bytes)
    # LTE: (beta + alpha_d x 20) x 0.4 s + (beta + alpha_u x 5) x 1.6 s + beta x 0.08 s
    want = ((1288.04 + 51.97 * 20) * 0.4 + (1288.04 + 438.39 * 5) * 1.6 + 1288.04 * 0.08) / 1e3
    assert radio == pytest.approx(want)
    assert comm_s(TRAITS, model_bytes) == pytest.approx(2.08)
    wifi = dataclasses.replace(TRAITS, cellular=False)
    assert comm_energy_j(wifi, model_bytes) < radio  # Wi-Fi's base power is a tenth of LTE's


def _drawn(n: int, seed: int) -> Windows:
    """Windows like a drawn population's: a charging window and day sessions per device."""
    rng = np.random.default_rng(seed)
    sessions = rng.integers(0, 4, n)
    device = np.concatenate([np.arange(n), np.repeat(np.arange(n), sessions)])
    start = np.concatenate([rng.normal(22.0, 2.0, n), rng.uniform(7.0, 23.0, sessions.sum())])
    length = np.concatenate([rng.normal(7.0, 1.5, n), rng.exponential(0.3, sessions.sum())])
    charging = np.concatenate([np.ones(n, bool), np.zeros(sessions.sum(), bool)])
    described = np.ones(n, bool)
    described[-3:] = False  # and a few devices without windows
    keep = described[device]
    return Windows.build(
        n,
        device[keep],
        start[keep] * H,
        length[keep] * H,
        charging[keep],
        np.full(n, DAY_S),
        described,
    )


def test_a_kept_cursor_gives_the_levels_a_fresh_look_gives_bit_for_bit() -> None:
    n = 500
    windows = _drawn(n, seed=4)
    rng = np.random.default_rng(5)
    idle, charge = rng.uniform(0.2, 1.0, n), rng.uniform(5.0, 15.0, n)
    capacity = rng.uniform(8.0, 20.0, n)
    kept = Cursor(windows)
    level, t = rng.uniform(10.0, 90.0, n), np.zeros(n)
    now = 0.0
    for step in rng.exponential(1200.0, 60):  # rounds of ~20 min for two virtual days
        now += float(step)
        late = rng.random(n) < 0.05  # devices whose reply came after the round's start
        t = np.where(late, t + float(rng.uniform(0.0, step)), t)
        cached = advance(level, t, now, windows, idle, charge, capacity, kept)
        fresh = advance(level, t, now, windows, idle, charge, capacity)
        assert np.array_equal(cached, fresh)
        level, t = cached, np.maximum(t, now)
        kept.at(np.arange(n), np.full(n, now))
        inside, _, _ = windows.state_of(np.arange(n), np.full(n, now))
        assert np.array_equal(kept.inside, inside)
        # Away from an edge, "just after now" is "at now".
        assert np.array_equal(kept.inside, windows.inside(now))


def test_a_cursor_reads_only_the_devices_that_crossed_an_edge() -> None:
    n = 10_000
    windows = _drawn(n, seed=6)
    cursor = Cursor(windows)
    everyone = np.arange(n)
    cursor.at(everyone, np.full(n, 12 * H))
    since = cursor.since.copy()
    cursor.at(everyone, np.full(n, 12 * H + 30.0))  # one 30 s round later
    re_read = int((cursor.since != since).sum())
    assert 0 < re_read < n // 50, re_read


def test_a_battery_charges_through_its_window_when_a_step_lands_on_its_edges() -> None:
    """Integrating edge to edge lands on each window's start and end as `t + gap`, a float
    that may fall a hair short of the edge. The level must follow the window all the same:
    before c76825a the rate was read at that t (just before the start: idle) while the edge
    within _EPS_S counted as passed, so such a device idled through its whole charging window
    (or charged on past its end)."""
    n = 300
    rng = np.random.default_rng(7)
    start = rng.uniform(0.5, 2.0, n) * H  # a charging window inside 23:00-05:00
    length = rng.uniform(1.0, 2.5, n) * H
    windows = Windows.build(
        n, np.arange(n), start, length, np.ones(n, bool), np.full(n, DAY_S), np.ones(n, bool)
    )
    idle, charge, capacity = np.full(n, 0.3), np.full(n, 2.0), np.full(n, 15.0)
    pct_per_s = 100.0 / (capacity * H)
    for day in range(1, 10):
        t0 = day * DAY_S - 1.0 * H  # 23:00
        level = np.full(n, 40.0)
        got = advance(level, np.full(n, t0), day * DAY_S + 5.0 * H, windows, idle, charge, capacity)
        # Idle to the window, charge through it, idle to 05:00 (no clipping on these figures).
        want = level + pct_per_s * (
            -idle * (start + 1.0 * H) + charge * length - idle * (5.0 * H - start - length)
        )
        np.testing.assert_allclose(got, want, atol=1e-6)
