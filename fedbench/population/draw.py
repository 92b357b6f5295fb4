"""A fleet's population: every device its own speed, network, availability and battery.

`draw` turns `fleet.population` (fedbench.experiment.population) into numpy
columns, one entry per device, from the experiment's seed: the same seed
and fleet give the same population, on the server and anywhere else that
draws it. Each quantity has its own random stream (seed, quantity), so
changing one distribution leaves the others' draws as they were. Traces
(`fleet.population.trace`), where given, replace the drawn capacity or
availability of the devices they name.

Devices without a profile (host, physical) get speed 1 and no windows
(always available); devices whose profile has no battery (boards on mains)
keep their profile's daily hours and have no battery columns (NaN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fedbench.core.device import Traits
from fedbench.devices.profile import DeviceProfile
from fedbench.experiment.population import MAX_SESSIONS, PopulationConfig
from fedbench.population.windows import DAY_S, Windows

# Stream ids: one per drawn quantity (never reuse or renumber one: it would
# change every population drawn before).
_SPEED, _BACKGROUND, _CELLULAR, _LINK, _CHARGE_WINDOW, _SESSIONS, _BATTERY, _JITTER = range(8)
_STREAM = 16  # this namespace inside the experiment seed
_BLOCK = 1 << 16  # devices drawn at a time where a draw is per device and session


def _rng(seed: int, *stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, _STREAM, *stream]))


def _key(seed: int, *stream: int) -> np.uint64:
    return np.random.SeedSequence([seed, _STREAM, *stream]).generate_state(1, np.uint64)[0]


def _normals(key: np.uint64, idx: np.ndarray, k: int) -> np.ndarray:
    """(k, len(idx)) standard normals, each a function of (key, device, row) only.

    Counter-based (a splitmix64 hash of the device's index, Box-Muller on two of
    its uniforms), so a round's jitter of device i is the same whichever devices
    are asked with it, and asking for the devices a round picked costs O(picked),
    not a draw over the whole fleet (3 x 1,000,000 lognormals a round at 1M).
    """
    with np.errstate(over="ignore"):
        counter = (
            idx.astype(np.uint64)[None, :] * np.uint64(2 * k)
            + np.arange(2 * k, dtype=np.uint64)[:, None]
        )
        x = counter ^ key
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    u = ((x >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)  # in (0, 1)
    return np.sqrt(-2.0 * np.log(u[:k])) * np.cos(2.0 * np.pi * u[k:])


@dataclass(frozen=True, eq=False)
class Population:
    """Per-device columns (length n); NaN where a device has no such thing."""

    speed: np.ndarray  # compute-speed factor: latency and energy of training / speed
    cellular: np.ndarray  # bool: on a cellular link (else the profile's Wi-Fi / LAN)
    down_mbps: np.ndarray
    up_mbps: np.ndarray
    rtt_ms: np.ndarray
    capacity_wh: np.ndarray
    battery0_pct: np.ndarray  # level at virtual time 0
    idle_w: np.ndarray
    charge_w: np.ndarray
    windows: Windows
    floor_pct: float
    jitter: float
    seed: int

    def __len__(self) -> int:
        return len(self.speed)

    def link(self, server_round: int, idx: np.ndarray) -> tuple[np.ndarray, ...]:
        """(down, up, rtt) of devices `idx` in one round: their own link, jittered."""
        idx = np.asarray(idx, dtype=np.int64)
        f = np.exp(self.jitter * _normals(_key(self.seed, _JITTER, server_round), idx, 3))
        return self.down_mbps[idx] * f[0], self.up_mbps[idx] * f[1], self.rtt_ms[idx] * f[2]

    def traits(self, server_round: int, i: int) -> Traits:
        down, up, rtt = self.link(server_round, np.array([i]))
        return Traits(
            speed=float(self.speed[i]),
            down_mbps=float(down[0]),
            up_mbps=float(up[0]),
            rtt_ms=float(rtt[0]),
            capacity_wh=float(self.capacity_wh[i]),
            cellular=bool(self.cellular[i]),
        )


def draw(
    config: PopulationConfig,
    profiles: Sequence[DeviceProfile | None],
    code: np.ndarray,
    seed: int,
    names: Sequence[str] = (),
) -> Population:
    """The population of a fleet whose device i has profile `profiles[code[i]]` (-1: none).

    `names`: the devices' names, for traces that name devices (else indices only).
    """
    profiles = tuple(profiles)
    n = len(code)
    has = code >= 0
    safe = np.where(has, code, 0)

    def column(get: object, missing: float = np.nan) -> np.ndarray:
        values = np.array([get(p) if p is not None else missing for p in profiles] or [missing])  # type: ignore[operator]
        return np.where(has, values[safe], missing)

    speed = _speed(config, column(lambda p: p.os.background_share, 1.0), has, seed)
    capacity = column(lambda p: p.battery.capacity_wh if p.battery.capacity_wh else np.nan)
    battery = ~np.isnan(capacity)
    cellular, down, up, rtt = _network(config, column, battery, seed)
    b = config.battery
    rng = _rng(seed, _BATTERY)
    health = rng.uniform(b.health_min, b.health_max, n)
    level0 = rng.uniform(b.initial_min_pct, b.initial_max_pct, n)
    idle = b.idle_w * rng.lognormal(0.0, b.idle_sigma, n)
    charge = b.charge_w * rng.lognormal(0.0, b.charge_sigma, n)
    nan = np.full(n, np.nan)
    pop = Population(
        speed=speed,
        cellular=cellular,
        down_mbps=down,
        up_mbps=up,
        rtt_ms=rtt,
        capacity_wh=np.where(battery, capacity * health, nan),
        battery0_pct=np.where(battery, level0, nan),
        idle_w=np.where(battery, idle, nan),
        charge_w=np.where(battery, charge, nan),
        windows=_windows(config, profiles, code, battery, seed),
        floor_pct=b.floor_pct,
        jitter=config.network.jitter,
        seed=seed,
    )
    trace = config.trace
    if trace.capacity or trace.availability:
        from fedbench.population.traces import apply_traces

        pop = apply_traces(pop, trace, list(names) or [str(i) for i in range(n)])
    return pop


def _speed(config: PopulationConfig, share: np.ndarray, has: np.ndarray, seed: int) -> np.ndarray:
    """Silicon and cooling variance (log-normal) x background share for some devices."""
    n = len(has)
    s = config.speed
    silicon = _rng(seed, _SPEED).lognormal(0.0, s.sigma, n)
    background = _rng(seed, _BACKGROUND).random(n) < s.background_fraction
    return np.where(has, silicon * np.where(background, share, 1.0), 1.0)


def _network(
    config: PopulationConfig, column: object, battery: np.ndarray, seed: int
) -> tuple[np.ndarray, ...]:
    """Each device's link: its profile's (Wi-Fi/LAN) or cellular medians, log-normal spread.

    Only battery-powered devices (phones) may be on cellular; boards keep their LAN.
    """
    n = len(battery)
    net = config.network
    cellular = battery & (_rng(seed, _CELLULAR).random(n) < net.cellular_fraction)
    spread = _rng(seed, _LINK).lognormal(0.0, net.sigma, size=(3, n))
    medians = []
    for key, cell in (
        ("down_mbps", net.cellular.down_mbps),
        ("up_mbps", net.cellular.up_mbps),
        ("rtt_ms", net.cellular.rtt_ms),
    ):
        own = column(lambda p, k=key: getattr(p.network, k))  # type: ignore[operator]
        medians.append(np.where(cellular, cell, own))
    return (cellular, *(m * s for m, s in zip(medians, spread, strict=True)))


def _windows(
    config: PopulationConfig,
    profiles: tuple[DeviceProfile | None, ...],
    code: np.ndarray,
    battery: np.ndarray,
    seed: int,
) -> Windows:
    """Battery devices: a nightly charging window and day sessions; mains: the profile's hours."""
    n = len(code)
    a = config.availability
    ids = np.flatnonzero(battery)
    rng = _rng(seed, _CHARGE_WINDOW)
    start_h = rng.normal(a.charging.start_hour_mean, a.charging.start_hour_sd, n)[ids]
    hours = np.clip(rng.normal(a.charging.hours_mean, a.charging.hours_sd, n), 0.5, 23.5)[ids]
    s = a.sessions
    rng = _rng(seed, _SESSIONS)
    count = np.minimum(rng.poisson(s.per_day, n), MAX_SESSIONS)
    used = (np.arange(MAX_SESSIONS)[None, :] < count[:, None]) & battery[:, None]
    rows = np.nonzero(used)[0]
    at_h = _used_draws(lambda size: rng.uniform(s.first_hour, s.last_hour, size), used)
    minutes = _used_draws(lambda size: rng.exponential(s.minutes_mean, size), used)
    # Mains-powered devices with a profile: their profile's daily hours, every day.
    mains = [(i, p) for i, p in enumerate(profiles) if p is not None and not p.battery.capacity_wh]
    m_dev: list[np.ndarray] = []
    m_start: list[np.ndarray] = []
    m_len: list[np.ndarray] = []
    for c, p in mains:
        members = np.flatnonzero(code == c)
        for start, end in p.availability.hours:
            length = (end - start) % 24.0 or 24.0
            m_dev.append(members)
            m_start.append(np.full(len(members), start * 3600.0))
            m_len.append(np.full(len(members), length * 3600.0))
    device = np.concatenate([ids, rows, *m_dev]).astype(np.int64)
    start_s = np.concatenate([start_h * 3600.0, at_h * 3600.0, *m_start])
    length_s = np.concatenate([hours * 3600.0, minutes * 60.0, *m_len])
    charging = np.concatenate(
        [np.ones(len(ids), bool), np.zeros(len(rows), bool), np.zeros(sum(map(len, m_dev)), bool)]
    )
    described = code >= 0
    return Windows.build(n, device, start_s, length_s, charging, np.full(n, DAY_S), described)


def _used_draws(draw: Callable[[tuple[int, int]], np.ndarray], used: np.ndarray) -> np.ndarray:
    """`draw((n, MAX_SESSIONS))[used]`, drawn a block of devices at a time.

    The generator yields the same numbers in blocks as in one call, so the
    population is the one drawn whole - without a devices x MAX_SESSIONS
    array per quantity (100 MB at 1,000,000 devices) for the few sessions used.
    """
    n, width = used.shape
    parts = [
        draw((min(_BLOCK, n - lo), width))[used[lo : lo + _BLOCK]] for lo in range(0, n, _BLOCK)
    ]
    return np.concatenate(parts) if parts else np.empty(0)
