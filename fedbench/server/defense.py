"""What a client's reply must satisfy before the server believes it.

A SuperNode is a device someone else holds: its reply may be buggy or
hostile. Two things are checked here (fedbench.server.replies applies them):

- **the cost report** (latency, energy, power, memory, temperature,
  battery): every figure must be finite, non-negative and within physical
  bounds for the device's profile (`CostBounds`). A figure that fails is
  refused - blanked, its reason recorded - so it never moves the virtual
  clock, the ledger or the run's totals; a refused *timing* figure also
  refuses the update, since the server cannot place the reply on its clock.
- **the update** (`Defense.examples_bound`, `distance_outliers`): num-examples
  must be a positive integer no larger than what the server knows the
  device holds, and an update may not lie farther from the global model
  than `max_norm_ratio` times the median distance of the round's updates of
  the same model shape (per-device submodels are compared within their
  width; a norm bound in
  the spirit of Sun et al., "Can you really backdoor federated learning?",
  2019). Robust aggregators (`algorithm=` FedMedian, Krum, ...) stay
  available for research on attacks; set `defense.max_norm_ratio=null`
  to let them face the attacker alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from flwr.app import ArrayRecord

from fedbench.core.device import DeviceSpec
from fedbench.core.meter import Meter
from fedbench.core.records import RoundReport
from fedbench.devices.meters import make_meter
from fedbench.experiment.fleet import by_profile
from fedbench.experiment.schema import DefenseConfig

# Figures of a report that place it on the virtual clock.
TIMING = ("latency_s", "comm_s", "round_trip_s")
# Silicon and batteries outside this range are not running a training job.
MIN_TEMP_C, MAX_TEMP_C = -40.0, 150.0
# A profile's busy power (all cores at top clock, memory saturated) x this,
# plus a fixed allowance for what profiles do not model (radio, GPU, display).
POWER_MARGIN, POWER_ALLOWANCE_W = 2.0, 10.0
FREQ_MARGIN = 1.5


@dataclass(frozen=True)
class CostBounds:
    """The most a device of one profile can plausibly report for one round."""

    max_round_trip_s: float
    max_power_w: float
    max_mem_mb: float = math.inf
    max_freq_ghz: float = 10.0

    def ranges(self) -> dict[str, tuple[float, float]]:
        return {
            "latency_s": (0.0, self.max_round_trip_s),
            "comm_s": (0.0, self.max_round_trip_s),
            "round_trip_s": (0.0, self.max_round_trip_s),
            "avg_power_w": (0.0, self.max_power_w),
            "energy_j": (0.0, self.max_power_w * self.max_round_trip_s),
            "peak_mem_mb": (0.0, self.max_mem_mb),
            "mem_budget_mb": (0.0, self.max_mem_mb),
            "temp_c_start": (MIN_TEMP_C, MAX_TEMP_C),
            "temp_c_end": (MIN_TEMP_C, MAX_TEMP_C),
            "freq_ghz_avg": (0.0, self.max_freq_ghz),
            "throttled_frac": (0.0, 1.0),
            "battery_pct": (0.0, 100.0),
            "host_wall_s": (0.0, self.max_round_trip_s),
        }


def bounds_for(meter: Meter, config: DefenseConfig) -> CostBounds:
    """Bounds from the device's ceilings (its meter's); the configured generic ones without."""
    ceilings = meter.ceilings()
    if ceilings is None:
        return CostBounds(config.max_round_trip_s, config.max_power_w)
    return CostBounds(
        max_round_trip_s=config.max_round_trip_s,
        max_power_w=POWER_MARGIN * ceilings.power_w + POWER_ALLOWANCE_W,
        max_mem_mb=ceilings.memory_mb,
        max_freq_ghz=FREQ_MARGIN * ceilings.freq_ghz,
    )


def check_costs(report: RoundReport, bounds: CostBounds) -> tuple[RoundReport, list[str]]:
    """The report with every implausible figure blanked (NaN), and why each was.

    NaN itself is "not measured" and passes; infinities do not.
    """
    problems: list[str] = []
    blank: dict[str, float] = {}
    for name, (lo, hi) in bounds.ranges().items():
        value = float(getattr(report, name))
        if math.isnan(value):
            continue
        if not math.isfinite(value) or not lo <= value <= hi:
            problems.append(f"{name}={value:g} outside [{lo:g}, {hi:g}]")
            blank[name] = math.nan
    if not math.isnan(report.energy_j) and "energy_j" not in blank:
        # Energy cannot exceed the most power over the time the device reports.
        span = report.round_trip_s if "round_trip_s" not in blank else math.nan
        if not math.isnan(span) and report.energy_j > bounds.max_power_w * max(span, 1.0):
            problems.append(
                f"energy_j={report.energy_j:g} exceeds {bounds.max_power_w:g} W "
                f"x round_trip_s={span:g}"
            )
            blank["energy_j"] = math.nan
    if blank.keys() & {"energy_j", "avg_power_w"}:
        blank.update(energy_j=math.nan, avg_power_w=math.nan)  # one is the other x time
    if blank.keys() & set(TIMING):
        blank.update({k: math.nan for k in TIMING})
        blank["end_s"] = math.nan
    return (replace(report, **blank) if blank else report), problems  # type: ignore[arg-type]


@dataclass(frozen=True)
class Defense:
    """The server's checks for one run: cost bounds per profile, example counts per device."""

    config: DefenseConfig = field(default_factory=DefenseConfig)
    bounds: Mapping[str, CostBounds] = field(default_factory=dict)  # profile -> bounds
    examples: Mapping[str, int] = field(default_factory=dict)  # device -> most it holds
    # Physical device -> the name its registered key was issued for (what it must announce).
    names: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        config: DefenseConfig,
        devices: Sequence[DeviceSpec],
        examples: Mapping[str, int] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Defense:
        # A device's ceilings are its profile's, whatever the fleet's knobs.
        bounds = {p: bounds_for(make_meter(d), config) for p, d in by_profile(devices).items()}
        # `examples` is kept as given: for a large fleet it is computed per device asked.
        return cls(config, bounds, examples if examples is not None else {}, dict(names or {}))

    def bounds_of(self, profile: str) -> CostBounds:
        found = self.bounds.get(profile)
        if found is None:
            found = CostBounds(self.config.max_round_trip_s, self.config.max_power_w)
        return found

    def wrong_name(self, device: str, announced: object) -> str:
        """Why a node's announced name does not fit the seat its key holds ("" if it does)."""
        expected = self.names.get(device)
        if expected is None or announced is None or announced == expected:
            return ""
        return (
            f"refused: node announces itself as {announced!r}, but holds the key registered "
            f"for {expected!r} (seat {device})"
        )

    def examples_bound(self, device: str) -> int:
        return self.examples.get(device, self.config.max_examples)


def distance(update: ArrayRecord, reference: Mapping[str, np.ndarray]) -> float:
    """L2 distance between an update and the global model over floating-point arrays.

    `reference` holds the global model's values, decoded once per round
    (fedbench.arrays.decode): a round compares every update with them.
    """
    total = 0.0
    for key, array in update.items():
        a = array.numpy()
        if a.dtype.kind != "f":
            continue
        d = a.astype(np.float64).ravel() - reference[key].astype(np.float64).ravel()
        # einsum, not np.dot: np.dot goes to OpenBLAS, whose threads spin against the
        # Ray workers for the cores; on a busy 2-core host one small CNN update took
        # 18 ms that way, 0.08 ms this way (a round compares every update).
        total += float(np.einsum("i,i->", d, d))
    return math.sqrt(total)


def distance_outliers(distances: Mapping[str, float], max_ratio: float | None) -> dict[str, str]:
    """Device -> why its update is too far from the global model (`max_ratio` x median).

    The lower median, so that with two updates an attacker's is judged
    against the honest one, not against the average of both.
    """
    if max_ratio is None or len(distances) < 2:
        return {}
    ordered = sorted(distances.values())
    median = ordered[(len(ordered) - 1) // 2]
    if not median > 0.0:
        return {}
    limit = max_ratio * median
    return {
        name: f"refused: update distance {d:.3g} > {max_ratio:g} x the round's median {median:.3g}"
        for name, d in distances.items()
        if not d <= limit
    }
