"""fleet.population: the distributions a fleet's devices are drawn from (typed, bounded).

Without it (`fleet.population: null`, the default) every device of a profile
is the profile. With it, each device gets its own compute-speed factor,
network, daily availability windows and battery, drawn from the seed
(fedbench.population.draw). The defaults here are the ones
fedbench/conf/fleet/population/phones.yaml spells out with their sources
(docs/populations.md); a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fedbench.errors import FedbenchError
from fedbench.experiment.typed import check

MAX_SESSIONS = 6  # day sessions a device may have; columns are this wide


@dataclass(frozen=True)
class SpeedConfig:
    """Compute-speed factor: 1 is the profile; 0.5 trains at half its speed."""

    sigma: float = check(0.1, ge=0.0, le=2.0)  # log-normal spread around 1 (units of one model)
    background_fraction: float = check(0.1, ge=0.0, le=1.0)  # devices training in background


@dataclass(frozen=True)
class LinkConfig:
    """Medians of one kind of link; a device's own link is drawn around them."""

    down_mbps: float = check(55.0, gt=0.0, le=100_000.0)
    up_mbps: float = check(12.6, gt=0.0, le=100_000.0)
    rtt_ms: float = check(37.0, ge=0.0, le=10_000.0)


@dataclass(frozen=True)
class NetworkConfig:
    """Devices are drawn around their profile's network; phones on cellular around `cellular`."""

    cellular_fraction: float = check(0.3, ge=0.0, le=1.0)
    cellular: LinkConfig = field(default_factory=LinkConfig)
    sigma: float = check(0.6, ge=0.0, le=3.0)  # log-normal spread across devices
    jitter: float = check(0.25, ge=0.0, le=3.0)  # log-normal spread of one round around it


@dataclass(frozen=True)
class ChargingConfig:
    """The nightly charging window: start hour and length, normal across devices."""

    start_hour_mean: float = check(23.0, ge=0.0, lt=24.0)
    start_hour_sd: float = check(1.5, ge=0.0, le=12.0)
    hours_mean: float = check(7.0, gt=0.0, lt=24.0)
    hours_sd: float = check(1.5, ge=0.0, le=12.0)


@dataclass(frozen=True)
class SessionsConfig:
    """Short daytime sessions on battery (idle, connected, unplugged)."""

    per_day: float = check(2.0, ge=0.0, le=float(MAX_SESSIONS))  # Poisson mean, capped
    minutes_mean: float = check(20.0, gt=0.0, le=600.0)  # exponential
    first_hour: float = check(8.0, ge=0.0, lt=24.0)
    last_hour: float = check(21.0, gt=0.0, le=24.0)

    def __post_init__(self) -> None:
        if self.last_hour <= self.first_hour:
            raise FedbenchError(
                f"fleet.population.availability.sessions: last_hour={self.last_hour:g} must be "
                f"after first_hour={self.first_hour:g}"
            )


@dataclass(frozen=True)
class AvailabilityConfig:
    charging: ChargingConfig = field(default_factory=ChargingConfig)
    sessions: SessionsConfig = field(default_factory=SessionsConfig)


@dataclass(frozen=True)
class BatteryConfig:
    """Battery of a device with one in its profile (mains-powered devices have none)."""

    health_min: float = check(0.8, gt=0.0, le=1.0)  # capacity = profile x U(min, max)
    health_max: float = check(1.0, gt=0.0, le=1.0)
    initial_min_pct: float = check(30.0, ge=0.0, le=100.0)  # level at virtual time 0: uniform
    initial_max_pct: float = check(100.0, ge=0.0, le=100.0)
    idle_w: float = check(0.3, ge=0.0, le=50.0)  # median drain off the charger, not training
    idle_sigma: float = check(0.5, ge=0.0, le=3.0)
    charge_w: float = check(10.0, gt=0.0, le=200.0)  # median charging power into the battery
    charge_sigma: float = check(0.35, ge=0.0, le=3.0)
    floor_pct: float = check(15.0, ge=0.0, le=100.0)  # below it the device is unavailable

    def __post_init__(self) -> None:
        for low, high in (("health_min", "health_max"), ("initial_min_pct", "initial_max_pct")):
            if getattr(self, low) > getattr(self, high):
                raise FedbenchError(
                    f"fleet.population.battery: {low}={getattr(self, low):g} is above "
                    f"{high}={getattr(self, high):g}"
                )


@dataclass(frozen=True)
class TraceConfig:
    """Measured traces that replace the drawn values (fedbench.population.traces)."""

    availability: str | None = None  # CSV/Parquet: device, start_s, end_s, state
    capacity: str | None = None  # CSV/Parquet: device, speed, down_mbps, up_mbps, rtt_ms


@dataclass(frozen=True)
class PopulationConfig:
    speed: SpeedConfig = field(default_factory=SpeedConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    availability: AvailabilityConfig = field(default_factory=AvailabilityConfig)
    battery: BatteryConfig = field(default_factory=BatteryConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)
