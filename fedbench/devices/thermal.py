"""Lumped RC thermal model with trip points, integrated exactly between events.

The device is one thermal mass: dT/dt = (T_amb + R P - T) / tau, where P is
the power above idle and T_amb the idle temperature. Under constant power
the solution is exponential, so training is integrated in segments of
constant throttle level: each segment runs until the work is done or the
temperature crosses the next trip (heating) or falls `hysteresis_c` below
the current one (cooling), whichever comes first; crossing times are solved
in closed form. No time step, so results do not depend on step size.

Levels: 0 = unthrottled, k = trips[k-1] in force, len(trips)+1 = critical
(every cluster at its lowest DVFS step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fedbench.core.device import DeviceState
from fedbench.devices.profile import DeviceProfile

MAX_SEGMENTS = 1_000_000  # a guard against a bug, far above any real run


def cool(profile: DeviceProfile, state: DeviceState, until_s: float) -> DeviceState:
    """Idle from `state.time_s` to `until_s`: exponential decay to the idle temperature."""
    dt = max(0.0, until_s - state.time_s)
    amb = profile.thermal.ambient_c
    temp = amb + (state.temp_c - amb) * math.exp(-dt / profile.thermal.time_constant_s)
    return DeviceState(
        temp_c=temp, battery_pct=state.battery_pct, time_s=max(until_s, state.time_s)
    )


def thresholds(profile: DeviceProfile) -> list[float]:
    return [t.temp_c for t in profile.thermal.trips] + [profile.thermal.critical_c]


def level_at(profile: DeviceProfile, temp_c: float) -> int:
    """The throttle level a device at `temp_c` is in (no hysteresis memory across rounds)."""
    return sum(1 for t in thresholds(profile) if temp_c >= t)


def cap_at(profile: DeviceProfile, level: int) -> float | None:
    """Clock cap in GHz at a level; 0.0 means the lowest DVFS step (critical)."""
    trips = profile.thermal.trips
    if level == 0:
        return None
    return trips[level - 1].cap_ghz if level <= len(trips) else 0.0


@dataclass(frozen=True)
class Segment:
    level: int
    seconds: float
    steps: float  # work done, in steps (fractional: a throttle can hit mid-step)
    temp_end_c: float


def _time_to(temp: float, target: float, steady: float, tau: float, rising: bool) -> float:
    """Time for the exponential from `temp` toward `steady` to reach `target`.

    0 if already past it in the direction of travel, inf if it never gets there.
    """
    sign = 1.0 if rising else -1.0
    if sign * (temp - target) >= 0:
        return 0.0
    if sign * (steady - target) <= 0:
        return math.inf
    return tau * math.log((temp - steady) / (target - steady))


def integrate(
    profile: DeviceProfile,
    temp_c: float,
    steps: float,
    step_at: Callable[[int], tuple[float, float]],
) -> list[Segment]:
    """Run `steps` steps from `temp_c`; `step_at(level)` gives (seconds, power above idle)."""
    th = profile.thermal
    limits = thresholds(profile)
    level = level_at(profile, temp_c)
    temp = temp_c
    left = steps
    out: list[Segment] = []
    for _ in range(MAX_SEGMENTS):
        if left <= 1e-12:
            return out
        seconds, power = step_at(level)
        steady = th.ambient_c + th.resistance_c_per_w * power
        need = left * seconds
        tau = th.time_constant_s
        up = _time_to(temp, limits[level], steady, tau, True) if level < len(limits) else math.inf
        down = (
            _time_to(temp, limits[level - 1] - th.hysteresis_c, steady, tau, False)
            if level > 0
            else math.inf
        )
        dt = min(need, up, down)
        done = left if dt == need else dt / seconds
        temp = steady + (temp - steady) * math.exp(-dt / th.time_constant_s)
        out.append(Segment(level, dt, done, temp))
        left -= done
        if dt == up and dt < need:
            level += 1
        elif dt == down and dt < need:
            level -= 1
    raise RuntimeError("thermal integration did not converge")  # a bug, not a user error
