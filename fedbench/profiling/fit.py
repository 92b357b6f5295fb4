"""Fit a device profile's free constants to the bench's measured step times.

The emulator's step time (fedbench.devices.step) comes from the profile's
cores, their clock and microarchitecture (`arch`: FLOPs per cycle, pipeline),
the memory bandwidth and the software stack (`framework`: kernel speed and
per-pass overhead), on top of the shared efficiencies fitted to published
measurements (calibration/fit.py). A new device's cores run at their own
efficiency relative to those constants, so profile_device fits:

- a clock scale `k`: every cluster's clock (and DVFS steps) becomes
  k x its nominal clock - the cluster's *effective* throughput relative to
  the fitted architecture constants (k = 1: the device behaves like the
  devices the constants were fitted to); it scales compute and per-pass
  overhead alike, as the emulator's clock does;
- the effective memory bandwidth (memory-bound operator classes);
- the per-call cost of this build of the framework relative to the fitted
  constants (`framework.dispatch_scale`: another interpreter, another torch
  version);
- the arch (when /proc/cpuinfo does not name the core) and the framework,
  by trying each and keeping the best.

Least squares on log(predicted / measured) step time, the same loss as
calibration/fit.py; predictions go through `fedbench.devices.emulator.emulate`
on the validated profile, so the fit is exactly what the bench will say.
Parameters that end at a schema bound (e.g. the 5 GHz clock ceiling) are
reported: the device is then outside what the profile can express.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from fedbench.devices.constants import load_constants
from fedbench.devices.emulator import emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import DeviceProfile, initial_state, parse_profile
from fedbench.measure.workload import Workload

MAX_GHZ = 5.0  # the profile schema's clock bound
MIN_GHZ = 0.1
BW_RANGE = (0.1, 1000.0)  # GB/s, the schema's bandwidth bound
DISPATCH_RANGE = (0.01, 100.0)  # framework.dispatch_scale's schema bound
SECTIONS = ("clusters", "memory", "power", "thermal", "network", "availability", "framework", "os")


@dataclass(frozen=True)
class Sample:
    """One bench case: its workload and the step time the device measured."""

    name: str
    workload: Workload
    seconds: float


@dataclass(frozen=True)
class Fit:
    arch: str
    framework: str
    clock_scale: float
    bandwidth_gbs: float
    dispatch_scale: float
    rms_log_error: float  # over the samples fitted
    at_bound: tuple[str, ...]  # parameters stuck at a schema bound
    profile: DeviceProfile


def with_params(
    base: Mapping[str, Any],
    arch: str,
    framework: str,
    scale: float,
    bandwidth_gbs: float,
    dispatch_scale: float = 1.0,
    digits: int | None = None,
) -> dict[str, Any]:
    """`base` (a profile as YAML data, clusters at nominal clocks) with fitted values in.

    `digits` rounds the fitted numbers for the file; the fit itself needs
    them unrounded (its finite differences are smaller than any rounding).
    """
    data = copy.deepcopy(dict(base))

    def r(value: float) -> float:
        return round(value, digits) if digits is not None else value

    for cluster in data["clusters"].values():
        top = cluster["nominal_ghz"] if "nominal_ghz" in cluster else cluster["max_freq_ghz"]
        steps = cluster.get("nominal_steps") or [top]
        cluster["max_freq_ghz"] = r(_ghz(top * scale))
        cluster["dvfs_ghz"] = sorted({r(_ghz(s * scale)) for s in steps} | {r(_ghz(top * scale))})
        cluster["arch"] = arch
        cluster.pop("nominal_ghz", None)
        cluster.pop("nominal_steps", None)
    data["memory"]["bandwidth_gbs"] = r(float(bandwidth_gbs))
    data["framework"]["name"] = framework
    data["framework"]["dispatch_scale"] = r(float(dispatch_scale))
    return data


def _ghz(value: float) -> float:
    return min(MAX_GHZ, max(MIN_GHZ, value))


def predict(profile: DeviceProfile, workload: Workload) -> float:
    """The emulator's time for one step of `workload` on an idle, cool `profile`."""
    emulation = emulate(profile, [(workload, 1)], initial_state(profile, 0.0), Knobs())
    return emulation.latency_s


def _scale_bounds(base: Mapping[str, Any]) -> tuple[float, float]:
    tops = [c.get("nominal_ghz", c["max_freq_ghz"]) for c in base["clusters"].values()]
    lows = [
        min(c.get("nominal_steps") or [c.get("nominal_ghz", c["max_freq_ghz"])])
        for c in base["clusters"].values()
    ]
    return MIN_GHZ / min(lows), MAX_GHZ / max(tops)


def fit_profile(
    base: Mapping[str, Any],
    samples: Sequence[Sample],
    archs: Sequence[str] | None = None,
    frameworks: Sequence[str] | None = None,
) -> Fit:
    """The best (arch, framework) and its fitted clock scale and bandwidth."""
    if not samples:
        raise ValueError("no bench samples to fit")
    consts = load_constants()
    archs = list(archs or consts.archs.arch)
    frameworks = list(frameworks or consts.fitted.cpu)
    lo_k, hi_k = _scale_bounds(base)
    best: Fit | None = None
    for arch in archs:
        for framework in frameworks:

            def build(x: np.ndarray, arch: str = arch, framework: str = framework) -> DeviceProfile:
                data = with_params(
                    base, arch, framework, math.exp(x[0]), math.exp(x[1]), math.exp(x[2])
                )
                # Validated as the file will be; the citations are written afterwards.
                data["sources"] = dict.fromkeys(SECTIONS, "being fitted")
                return parse_profile(data, "<fit>", expected_name=str(base["name"]))

            result = least_squares(
                _residuals(build, samples),
                x0=[0.0, math.log(10.0), 0.0],
                bounds=(
                    [math.log(lo_k), math.log(BW_RANGE[0]), math.log(DISPATCH_RANGE[0])],
                    [math.log(hi_k), math.log(BW_RANGE[1]), math.log(DISPATCH_RANGE[1])],
                ),
                diff_step=1e-4,
            )
            rms = float(np.sqrt(np.mean(np.square(result.fun))))
            if best is None or rms < best.rms_log_error:
                k, bw, ds = (float(v) for v in np.exp(result.x))
                stuck = []
                if k >= hi_k * 0.999:
                    stuck.append(f"clock at the {MAX_GHZ:g} GHz ceiling")
                if k <= lo_k * 1.001:
                    stuck.append(f"clock at the {MIN_GHZ:g} GHz floor")
                if bw >= BW_RANGE[1] * 0.999 or bw <= BW_RANGE[0] * 1.001:
                    stuck.append("bandwidth at its bound")
                if ds >= DISPATCH_RANGE[1] * 0.999 or ds <= DISPATCH_RANGE[0] * 1.001:
                    stuck.append("per-call cost at its bound")
                rounded = [math.log(round(k, 6)), math.log(round(bw, 4)), math.log(round(ds, 4))]
                best = Fit(arch, framework, k, bw, ds, rms, tuple(stuck), build(np.array(rounded)))
    assert best is not None
    return best


def _residuals(
    build: Callable[[np.ndarray], DeviceProfile], samples: Sequence[Sample]
) -> Callable[[np.ndarray], list[float]]:
    def residuals(x: np.ndarray) -> list[float]:
        profile = build(x)
        return [math.log(predict(profile, s.workload) / s.seconds) for s in samples]

    return residuals


def errors(profile: DeviceProfile, samples: Sequence[Sample]) -> dict[str, tuple[float, float]]:
    """Per sample: (predicted seconds, relative error predicted/measured - 1)."""
    out = {}
    for s in samples:
        p = predict(profile, s.workload)
        out[s.name] = (p, p / s.seconds - 1.0)
    return out
