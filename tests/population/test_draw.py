"""A drawn population: reproducible from the seed, and distributed as its config says."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from fedbench.devices.profile import load_profile
from fedbench.errors import FedbenchError
from fedbench.experiment.population import PopulationConfig
from fedbench.experiment.typed import parse
from fedbench.paths import conf_dir
from fedbench.population.draw import draw
from tests.population.fleets import phones

COLUMNS = ("speed", "down_mbps", "up_mbps", "rtt_ms", "capacity_wh", "battery0_pct", "idle_w")


def test_the_same_seed_draws_the_same_population_another_seed_another() -> None:
    a, b, c = phones(2000, seed=3), phones(2000, seed=3), phones(2000, seed=4)
    for name in COLUMNS:
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
        assert not np.allclose(getattr(a, name), getattr(c, name), equal_nan=True), name
    assert np.array_equal(a.windows.start_s, b.windows.start_s)
    # Devices of one profile differ from each other.
    same_profile = a.speed[::4]
    assert len(np.unique(same_profile)) == len(same_profile)


def test_changing_one_distribution_keeps_the_other_draws() -> None:
    base = phones(1000, seed=1)
    config = PopulationConfig(network=dataclasses.replace(PopulationConfig().network, sigma=1.2))
    other = phones(1000, seed=1, config=config)
    assert np.array_equal(base.speed, other.speed)
    assert np.array_equal(base.capacity_wh, other.capacity_wh)
    assert not np.allclose(base.down_mbps, other.down_mbps)


def test_a_seeded_population_has_its_distributions_statistics() -> None:
    config = PopulationConfig()
    pop = phones(40_000, seed=7)
    s = config.speed
    # Speed: log-normal(0, sigma) for foreground devices, x background_share for the rest.
    share = load_profile("samsung_s8plus").os.background_share
    fg = pop.speed > 0.6  # background devices run at ~share (~0.33) of the speed
    assert share < 0.6
    assert np.mean(~fg) == pytest.approx(s.background_fraction, abs=0.01)
    assert np.median(np.log(pop.speed[fg])) == pytest.approx(0.0, abs=0.01)
    assert np.std(np.log(pop.speed[fg])) == pytest.approx(s.sigma, rel=0.05)
    # Network: the cellular share, and cellular devices around the cellular medians.
    net = config.network
    assert pop.cellular.mean() == pytest.approx(net.cellular_fraction, abs=0.01)
    cell = pop.cellular
    assert np.median(pop.down_mbps[cell]) == pytest.approx(net.cellular.down_mbps, rel=0.03)
    assert np.std(np.log(pop.up_mbps[cell])) == pytest.approx(net.sigma, rel=0.05)
    wifi = ~cell & (np.arange(len(pop)) % 4 == 0)  # samsung_s8plus on Wi-Fi: its profile's
    assert np.median(pop.down_mbps[wifi]) == pytest.approx(
        load_profile("samsung_s8plus").network.down_mbps, rel=0.05
    )
    # Battery: health x profile capacity, uniform initial level.
    b = config.battery
    health = pop.capacity_wh[::4] / load_profile("samsung_s8plus").battery.capacity_wh
    assert health.min() >= b.health_min and health.max() <= b.health_max
    assert np.mean(pop.battery0_pct) == pytest.approx(
        (b.initial_min_pct + b.initial_max_pct) / 2, abs=0.5
    )
    assert np.median(pop.idle_w) == pytest.approx(b.idle_w, rel=0.03)
    assert np.median(pop.charge_w) == pytest.approx(b.charge_w, rel=0.03)


def _expected_charging_share(hour: float, n: int = 400_000) -> float:
    """P(a device charges at `hour`) from the configured distributions, sampled afresh."""
    c = PopulationConfig().availability.charging
    rng = np.random.default_rng(12345)
    start = rng.normal(c.start_hour_mean, c.start_hour_sd, n)
    length = np.clip(rng.normal(c.hours_mean, c.hours_sd, n), 0.5, 23.5)
    return float(np.mean(np.mod(hour - start, 24.0) < length))


def test_availability_over_the_virtual_day_follows_the_drawn_windows() -> None:
    pop = phones(40_000, seed=11)
    w = pop.windows
    for hour in (0.0, 3.0, 6.5, 12.0, 22.0):
        t = (2 * 24 + hour) * 3600.0  # day 2: the pattern repeats daily
        share = w.charging_at(t).mean()
        assert share == pytest.approx(_expected_charging_share(hour), abs=0.01), hour
    # Hours a day: the charging window's mean length, and the day sessions'
    # Poisson(per_day) x exponential(minutes_mean) (capped at 6, overlaps counted twice).
    a = PopulationConfig().availability
    charging = w.hours_per_day(charging=True)
    assert charging.mean() == pytest.approx(a.charging.hours_mean, abs=0.05)
    sessions = w.hours_per_day(charging=False)
    assert sessions.mean() == pytest.approx(
        a.sessions.per_day * a.sessions.minutes_mean / 60, rel=0.05
    )
    # Inside the day's session hours the devices on battery are those in a session.
    noon = (24 + 14.0) * 3600.0
    on_battery = w.inside(noon) & ~w.charging_at(noon)
    expected = 1 - np.exp(-a.sessions.per_day * a.sessions.minutes_mean / 60 / 13.0)
    assert on_battery.mean() == pytest.approx(expected, abs=0.01)


def test_inside_matches_each_devices_own_windows() -> None:
    pop = phones(300, seed=2)
    w = pop.windows
    rng = np.random.default_rng(0)
    for t in rng.uniform(0, 5 * 86_400, 40):
        got = w.inside(t)
        phase = t % 86_400
        for i in rng.integers(0, 300, 10):
            rows = w.device == i
            want = np.any((w.start_s[rows] <= phase) & (phase < w.end_s[rows]))
            assert got[i] == want == w.device_inside(int(i), t)


def test_mains_powered_devices_keep_their_profile_hours_and_have_no_battery() -> None:
    profiles = [load_profile("samsung_s8plus"), load_profile("rpi4")]
    pop = draw(PopulationConfig(), profiles, np.array([0, 1, -1], dtype=np.int32), 0)
    assert np.isnan(pop.capacity_wh[1]) and np.isnan(pop.battery0_pct[1])
    rpi_hours = load_profile("rpi4").availability.hours
    assert pop.windows.hours_per_day()[1] == pytest.approx(
        sum((e - s) % 24 or 24 for s, e in rpi_hours)
    )
    assert pop.speed[2] == 1.0 and not pop.windows.described[2]  # host: no profile


def test_the_yaml_defaults_are_the_typed_defaults() -> None:
    data = yaml.safe_load((conf_dir() / "fleet" / "population" / "phones.yaml").read_text())
    assert parse(PopulationConfig, data, "fleet.population") == PopulationConfig()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"speed": {"sigma": -1}}, r"fleet.population.speed.sigma=-1.0: must be >= 0 and <= 2"),
        ({"battery": {"floor": 10}}, r"unknown key \(did you mean 'floor_pct'\?\)"),
        ({"battery": {"health_min": 0.9, "health_max": 0.8}}, "health_min=0.9 is above"),
        ({"availability": {"sessions": {"first_hour": 20, "last_hour": 9}}}, "must be after"),
        ({"network": {"cellular_fraction": 1.5}}, r"cellular_fraction=1.5: must be >= 0 and <= 1"),
    ],
)
def test_bad_population_keys_are_one_line_errors(values: dict, message: str) -> None:
    with pytest.raises(FedbenchError, match=message):
        parse(PopulationConfig, values, "fleet.population")


def test_a_fleet_config_takes_a_population(tmp_path: Path) -> None:
    from fedbench.experiment.schema import FleetConfig

    fleet = parse(
        FleetConfig,
        {"name": "f", "devices": [{"profile": "pixel2", "count": 2}], "population": {}},
        "fleet",
    )
    assert fleet.population == PopulationConfig()
