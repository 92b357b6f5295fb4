"""Fit a device profile's free constants to the bench's measured step times.

The emulator's step time (fedbench.devices.step) comes from the profile's
cores, their clock and microarchitecture (`arch`: FLOPs per cycle, pipeline),
its memory (bandwidth, cache) and the software stack (`framework`: the
kernel constants calibration/fit.py fitted to published measurements on ARM
phones and boards). The device this runs on has its own build of the stack:
x86 PyTorch, for one, convolves through oneDNN at a far larger share of peak
than an ARM build and hardly unfolds to im2col, while its pooling kernels
are scalar loops. So profile_device fits, as ratios to the fitted constants
(`PARAMS`; the profile's `framework.kernel_scale` and `dispatch_scale`):

- the kernels' speed per kind: GEMM-shaped calls, depthwise convolutions,
  streaming elementwise ops, the cache bytes per cycle, pools and
  normalisations (cycles per element written) and the im2col passes;
- the per-call cost of this build (`dispatch`);
- the effective memory bandwidth (the cache size is measured: sysfs);
- the clock scale, only when the device exposes no clock: it then takes the
  place of the GEMM ratio, with which it would be degenerate;
- the arch (when /proc/cpuinfo does not name the core) by trying each and
  keeping the best; the framework is the bench's own (PyTorch), unless the
  caller offers others to try.

It fits only what the bench cases identify (`default_free`): the kernel
ratios need the kernel probes (fedbench.profiling.probes, one kind of
kernel each) benched alongside the models; from models alone it fits one
speed ratio, the bandwidth and the per-call cost. Least squares on
log(predicted / measured) step time, the loss of calibration/fit.py,
starting from the fitted stack (every ratio 1). Predictions go through
`fedbench.devices.emulator.emulate` on the validated profile, so the fit
is exactly what the bench will say. Constants that end at a schema bound
are reported: the device is then outside what the profile can express.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from fedbench.core.workload import Workload
from fedbench.devices.constants import load_constants
from fedbench.devices.emulator import emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import DeviceProfile, initial_state, parse_profile
from fedbench.profiling.probes import probe_cases

MAX_GHZ = 5.0  # the profile schema's clock bound
MIN_GHZ = 0.1
# The bench runs PyTorch, so by default its ratios are to PyTorch's fitted constants.
BENCH_FRAMEWORK = "pytorch"
SECTIONS = ("clusters", "memory", "power", "thermal", "network", "availability", "framework", "os")


@dataclass(frozen=True)
class Param:
    """One constant profile_device can fit, in log space between schema bounds."""

    name: str
    lower: float
    upper: float
    meaning: str


KERNELS = ("gemm", "depthwise", "elementwise", "cache", "pool", "norm", "unfold")
PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("clock", MIN_GHZ, MAX_GHZ, "effective clock / nominal clock (clusters)"),
        Param("bandwidth", 0.1, 1000.0, "memory.bandwidth_gbs, GB/s"),
        Param("dispatch", 0.01, 100.0, "framework.dispatch_scale: x per-call cost"),
        Param("gemm", 0.01, 100.0, "kernel_scale.gemm: x GEMM efficiency"),
        Param("depthwise", 0.01, 100.0, "kernel_scale.depthwise: x depthwise efficiency"),
        Param("elementwise", 0.01, 100.0, "kernel_scale.elementwise: x elementwise eff."),
        Param("cache", 0.01, 100.0, "kernel_scale.cache: x cache bytes per cycle"),
        Param("pool", 0.01, 100.0, "kernel_scale.pool: x pool cycles per output"),
        Param("norm", 0.01, 100.0, "kernel_scale.norm: x norm cycles per output"),
        Param("unfold", 1e-4, 100.0, "kernel_scale.unfold: x im2col passes"),
    )
}


def default_free(base: Mapping[str, Any], samples: Sequence[Sample]) -> tuple[str, ...]:
    """What the cases identify, so what to fit.

    With every kernel probe benched: each kernel ratio and the rest; with
    models alone, whose kinds are entangled: one speed ratio, the
    bandwidth and the per-call cost. The speed ratio is the GEMM ratio, or
    the clock scale when the device exposes no clock (the two would be
    degenerate).
    """
    clocked = all(c.get("clock_measured", False) for c in base["clusters"].values())
    speed = "gemm" if clocked else "clock"
    if not {s.name for s in samples} >= set(probe_cases()):
        return (speed, "bandwidth", "dispatch")
    kernels = KERNELS if clocked else tuple(k for k in KERNELS if k != "gemm")
    return (*(("clock",) if not clocked else ()), "bandwidth", "dispatch", *kernels)


def start_values(base: Mapping[str, Any]) -> dict[str, float]:
    """Every constant's value before the fit (and its prior centre)."""
    values = dict.fromkeys(PARAMS, 1.0)
    values["bandwidth"] = float(base["memory"]["bandwidth_gbs"])
    return values


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
    values: Mapping[str, float]  # every PARAMS name, fitted or at its start value
    free: tuple[str, ...]  # the ones fitted
    rms_log_error: float  # over the samples fitted
    at_bound: tuple[str, ...]  # parameters stuck at a schema bound
    profile: DeviceProfile

    @property
    def clock_scale(self) -> float:
        return self.values["clock"]

    @property
    def bandwidth_gbs(self) -> float:
        return self.values["bandwidth"]

    @property
    def dispatch_scale(self) -> float:
        return self.values["dispatch"]

    def describe(self) -> str:
        """The fitted constants, one `name value` each."""
        return ", ".join(f"{k} {self.values[k]:.3g}" for k in self.free)


def with_params(
    base: Mapping[str, Any],
    arch: str,
    framework: str,
    values: Mapping[str, float],
    digits: int | None = None,
) -> dict[str, Any]:
    """`base` (a profile as YAML data, clusters at nominal clocks) with `values` in.

    `values` maps PARAMS names to values (missing: 1, or base's own
    bandwidth). `digits` rounds the fitted numbers for the file; the fit
    itself needs them unrounded (its finite differences are smaller than any
    rounding).
    """
    data = copy.deepcopy(dict(base))
    v = start_values(base) | dict(values)

    def r(value: float) -> float:
        return round(value, digits) if digits is not None else value

    scale = v["clock"]
    for cluster in data["clusters"].values():
        top = cluster["nominal_ghz"] if "nominal_ghz" in cluster else cluster["max_freq_ghz"]
        steps = cluster.get("nominal_steps") or [top]
        cluster["max_freq_ghz"] = r(_ghz(top * scale))
        cluster["dvfs_ghz"] = sorted({r(_ghz(s * scale)) for s in steps} | {r(_ghz(top * scale))})
        cluster["arch"] = arch
        for key in ("nominal_ghz", "nominal_steps", "clock_measured"):
            cluster.pop(key, None)
    data["memory"]["bandwidth_gbs"] = r(v["bandwidth"])
    data["framework"]["name"] = framework
    data["framework"]["dispatch_scale"] = r(v["dispatch"])
    data["framework"]["kernel_scale"] = {k: r(v[k]) for k in KERNELS}
    return data


def _ghz(value: float) -> float:
    return min(MAX_GHZ, max(MIN_GHZ, value))


def predict(profile: DeviceProfile, workload: Workload) -> float:
    """The emulator's time for one bench step of `workload` on an idle, cool `profile`.

    The bench times steps on a batch already in memory, so no input loading
    is charged (the framework's input cost models decoding a dataset).
    """
    step = dataclasses.replace(workload, input_bytes=0)
    emulation = emulate(profile, [(step, 1)], initial_state(profile, 0.0), Knobs())
    return emulation.latency_s


def _bounds(base: Mapping[str, Any], name: str) -> tuple[float, float]:
    if name != "clock":
        return PARAMS[name].lower, PARAMS[name].upper
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
    free: Sequence[str] | None = None,
) -> Fit:
    """The best (arch, framework) and its fitted constants (`free`: default_free(base))."""
    if not samples:
        raise ValueError("no bench samples to fit")
    free = tuple(free or default_free(base, samples))
    unknown = [name for name in free if name not in PARAMS]
    if unknown:
        raise ValueError(f"unknown constants {unknown}; valid: {list(PARAMS)}")
    consts = load_constants()
    archs = list(archs or consts.archs.arch)
    frameworks = list(frameworks or (BENCH_FRAMEWORK,))
    start = start_values(base)
    bounds = [_bounds(base, n) for n in free]
    lower, upper = np.log(bounds).T
    x0 = np.clip(np.log([start[n] for n in free]), lower + 1e-9, upper - 1e-9)
    best: Fit | None = None
    for arch in archs:
        for framework in frameworks:

            def build(x: np.ndarray, arch: str = arch, framework: str = framework) -> DeviceProfile:
                data = with_params(base, arch, framework, _values(free, x, bounds))
                # Validated as the file will be; the citations are written afterwards.
                data["sources"] = dict.fromkeys(SECTIONS, "being fitted")
                return parse_profile(data, "<fit>", expected_name=str(base["name"]))

            result = least_squares(
                _residuals(build, samples),
                x0=x0,
                bounds=(lower, upper),
                diff_step=1e-4,
            )
            rms = float(np.sqrt(np.mean(np.square(result.fun))))
            if best is None or rms < best.rms_log_error:
                fitted = _values(free, result.x, bounds)
                stuck = tuple(
                    f"{n} at its {'upper' if x >= hi - 1e-3 else 'lower'} bound"
                    for n, x, lo, hi in zip(free, result.x, lower, upper, strict=True)
                    if x >= hi - 1e-3 or x <= lo + 1e-3
                )
                rounded = {n: round(v, 6) for n, v in fitted.items()}
                profile = build(np.log([rounded[n] for n in free]))
                best = Fit(arch, framework, start | fitted, free, rms, stuck, profile)
    assert best is not None
    return best


def _values(
    free: Sequence[str], x: np.ndarray, bounds: Sequence[tuple[float, float]]
) -> dict[str, float]:
    """The constants at log-space point `x`, within their bounds.

    exp(log(bound)) can land a rounding error outside the schema's bound.
    """
    return {
        n: min(max(math.exp(v), lo), hi) for n, v, (lo, hi) in zip(free, x, bounds, strict=True)
    }


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
