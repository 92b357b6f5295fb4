"""Device profiles: one YAML per device in device_profiles/, loaded into frozen dataclasses.

A profile is data, not code: the device's CPU clusters (cores, clocks, DVFS
steps, microarchitecture, power), its GPU if it has one (lanes, clock,
power, software stack), memory (size, the budget training tensors may
use, what the process can keep resident, swap, bandwidth, last-level
cache), idle and memory power, a lumped thermal model with trip points,
network, daily availability, battery, software stack and governor. Every numeric field
cites where it came from under `sources:` (a field path, or a section
covering all fields below it); a profile with an uncited number, an unknown
key, a wrong type or an out-of-range value (e.g. MHz where GHz is expected)
is refused with a FedbenchError naming the file and the key path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml

from fedbench.core.device import DeviceState
from fedbench.devices.constants import load_constants
from fedbench.devices.schema import Bound, Reader, all_paths, numeric_paths
from fedbench.errors import FedbenchError, choices, closest
from fedbench.paths import profiles_dir
from fedbench.trust import bounded

KINDS: tuple[str, ...] = ("phone", "sbc", "jetson")
Hour = Annotated[float, Bound("hour of day", 0.0, 24.0)]


@dataclass(frozen=True)
class Cluster:
    name: str
    cores: Annotated[int, Bound("cores", 1, 64)]
    max_freq_ghz: Annotated[float, Bound("GHz", 0.1, 5.0)]
    dvfs_ghz: tuple[Annotated[float, Bound("GHz", 0.01, 5.0)], ...]
    arch: str  # a key of arch_specs.yaml
    core_power_w: Annotated[float, Bound("W per busy core at max frequency", 0.005, 10.0)]
    cluster_power_w: Annotated[
        float, Bound("W of shared cluster logic at max frequency", 0.0, 10.0)
    ]


@dataclass(frozen=True)
class Memory:
    total_mb: Annotated[int, Bound("MB", 64, 1_048_576)]
    train_budget_mb: Annotated[int, Bound("MB", 16, 1_048_576)]
    bandwidth_gbs: Annotated[float, Bound("GB/s", 0.1, 1000.0)]
    # Other apps taking memory during the day: [start hour, end hour, fraction
    # of train_budget_mb left to training] (start > end wraps past midnight;
    # overlapping windows: the smallest fraction). The memory planner re-plans
    # for the budget at each step's virtual time (fedbench.devices.budget).
    pressure: tuple[tuple[Hour, Hour, Annotated[float, Bound("fraction", 0.01, 1.0)]], ...] = ()
    # Last-level cache the training cores share: a call whose operands fit
    # runs from cache, a larger one streams from DRAM.
    cache_mb: Annotated[float, Bound("MB", 0.03, 1024.0)] = 1.0
    # Resident set (RSS) the training process can hold before the OS starts
    # reclaiming its pages (Android's low-memory management, Linux page
    # reclaim); beyond it the excess swaps every step (None: total_mb).
    available_mb: Annotated[int, Bound("MB", 16, 1_048_576)] | None = None
    # Swap (zram, a swap file) and its throughput; a resident set beyond
    # available + swap cannot run (oom).
    swap_mb: Annotated[int, Bound("MB", 0, 1_048_576)] = 0
    swap_gbs: Annotated[float, Bound("GB/s", 0.001, 100.0)] = 1.0

    @property
    def resident_mb(self) -> int:
        return self.total_mb if self.available_mb is None else self.available_mb


@dataclass(frozen=True)
class Power:
    idle_w: Annotated[float, Bound("W", 0.0, 100.0)]
    mem_w_per_gbs: Annotated[float, Bound("W per GB/s of DRAM traffic", 0.0, 2.0)]
    # V(f) = floor + (1 - floor) f/fmax, as a fraction of the voltage at fmax.
    voltage_floor: Annotated[float, Bound("fraction of max voltage", 0.0, 1.0)]


@dataclass(frozen=True)
class Trip:
    temp_c: Annotated[float, Bound("degC", 0.0, 150.0)]
    cap_ghz: Annotated[float, Bound("GHz", 0.01, 5.0)]


@dataclass(frozen=True)
class Thermal:
    # The device's idle equilibrium temperature: power above idle heats it.
    ambient_c: Annotated[float, Bound("degC", -20.0, 100.0)]
    resistance_c_per_w: Annotated[float, Bound("degC per W", 0.1, 200.0)]
    time_constant_s: Annotated[float, Bound("s", 1.0, 86_400.0)]
    hysteresis_c: Annotated[float, Bound("degC", 0.5, 30.0)]
    trips: tuple[Trip, ...]
    critical_c: Annotated[float, Bound("degC", 0.0, 150.0)]


@dataclass(frozen=True)
class Network:
    up_mbps: Annotated[float, Bound("Mbit/s", 0.01, 100_000.0)]
    down_mbps: Annotated[float, Bound("Mbit/s", 0.01, 100_000.0)]
    rtt_ms: Annotated[float, Bound("ms", 0.0, 10_000.0)]


@dataclass(frozen=True)
class Availability:
    # [start, end) hours of the day; start > end wraps past midnight.
    hours: tuple[tuple[Hour, Hour], ...]


@dataclass(frozen=True)
class Battery:
    capacity_wh: Annotated[float, Bound("Wh", 0.1, 1000.0)] | None


KernelRatio = Annotated[float, Bound("x the framework's fitted constant", 0.01, 100.0)]


@dataclass(frozen=True)
class KernelScale:
    """This device's kernels relative to its framework's fitted constants.

    The shared constants (fitted_constants.yaml) describe the framework's
    kernels on the devices they were fitted to (ARM phones and boards). A
    build of the same framework on another ISA links other kernels: x86
    PyTorch runs GEMMs and convolutions through oneDNN, which reaches a
    larger share of peak and convolves directly instead of unfolding to
    im2col. profile_device fits these ratios for a host from its own timed
    steps; the shipped profiles keep 1 (the fitted kernels themselves).
    """

    gemm: KernelRatio = 1.0  # x gemm_eff (matmul and dense convolutions)
    depthwise: KernelRatio = 1.0  # x depthwise_eff
    elementwise: KernelRatio = 1.0  # x elementwise_eff
    cache: KernelRatio = 1.0  # x cache_bytes_per_cycle (wider loads, bigger caches)
    # x pool_cycles_per_output and norm_cycles_per_output (costs: above 1 is slower)
    pool: KernelRatio = 1.0
    norm: KernelRatio = 1.0
    # x the passes over the im2col matrix (0: direct convolution kernels)
    unfold: Annotated[float, Bound("x the framework's fitted passes", 0.0, 100.0)] = 1.0


@dataclass(frozen=True)
class Framework:
    name: str
    threads: Annotated[int, Bound("threads", 1, 256)]
    # This device's per-call framework cost relative to the framework's fitted
    # dispatch (another build or interpreter of the same stack); fitted by
    # profile_device for a host, 1 for the shipped profiles.
    dispatch_scale: Annotated[float, Bound("x the fitted per-call cost", 0.01, 100.0)] = 1.0
    kernel_scale: KernelScale = KernelScale()
    # The convolution library this build links (fedbench.devices.lowering):
    # "nnpack" for PyTorch's ARM wheels, which lack oneDNN (the calibration
    # rows' boards), "onednn" for a build that convolves through oneDNN at
    # every batch (x86 wheels; profile_device asks torch).
    conv_backend: str = "nnpack"


GOVERNORS: tuple[str, ...] = ("top", "sustained")
# The convolution libraries a build may link (Framework.conv_backend; how each
# runs a convolution: fedbench.devices.lowering).
CONV_BACKENDS: tuple[str, ...] = ("nnpack", "onednn")


@dataclass(frozen=True)
class Os:
    # Share of the CPU a background (low priority) process gets while the
    # user's foreground apps run (paper 002: background training ~3x slower).
    background_share: Annotated[float, Bound("fraction of CPU time", 0.01, 1.0)]
    # The default governor under a training load: "top" runs busy clusters
    # at their top DVFS step (Linux boards' ondemand/schedutil), "sustained"
    # at the share of it a phone's power management holds (a fitted shared
    # constant, fitted_constants.yaml shared.phone_sustained_clock), with
    # clusters of worker threads alone following their load
    # (fedbench.devices.cpu.load_clocks). A clock knob (userspace governor)
    # overrides either.
    governor: str = "top"


@dataclass(frozen=True)
class Gpu:
    """An integrated GPU sharing the device's DRAM (and its bandwidth) with the CPU."""

    name: str
    lanes: Annotated[int, Bound("FP32 lanes (CUDA cores, ALUs)", 1, 100_000)]
    max_freq_ghz: Annotated[float, Bound("GHz", 0.05, 5.0)]
    # A key of fitted_constants.yaml `gpu` (tensorflow: CUDA; mnn_opencl).
    framework: str
    # GPU power at max clock while busy, and its DVFS floor share of it.
    busy_power_w: Annotated[float, Bound("W", 0.01, 100.0)]
    # Host<->device copies (OpenCL buffer/image maps), GB/s; frameworks with
    # transfer_fraction 0 never copy.
    copy_gbs: Annotated[float, Bound("GB/s", 0.01, 1000.0)] = 10.0
    flops_per_lane_cycle: Annotated[float, Bound("FLOPs per lane per cycle", 1.0, 4.0)] = 2.0

    @property
    def peak_gflops(self) -> float:
        return self.lanes * self.flops_per_lane_cycle * self.max_freq_ghz


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    kind: str
    soc: str
    clusters: tuple[Cluster, ...]
    memory: Memory
    power: Power
    thermal: Thermal
    network: Network
    availability: Availability
    battery: Battery
    framework: Framework
    os: Os
    sources: Mapping[str, str]
    gpu: Gpu | None = None

    @property
    def total_cores(self) -> int:
        return sum(c.cores for c in self.clusters)

    def cluster(self, name: str) -> Cluster:
        for c in self.clusters:
            if c.name == name:
                return c
        raise FedbenchError(
            f"profile {self.name}: no cluster '{name}'{closest(name, self.cluster_names)}; "
            f"valid: {choices(self.cluster_names)}"
        )

    @property
    def cluster_names(self) -> list[str]:
        return [c.name for c in self.clusters]


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (else the last wins)."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)  # type: ignore[no-untyped-call]
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"key {key!r} is given twice (the last would silently win); give it once",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def profile_names() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def load_profile(name_or_path: str | Path) -> DeviceProfile:
    """Load and validate `fedbench/device_profiles/<name>.yaml`, or a YAML at a path."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or path.parent != Path(".")):
        path = profiles_dir() / f"{text}.yaml"
        if not path.is_file():
            names = profile_names()
            raise FedbenchError(
                f"unknown device profile '{text}'{closest(text, names)}; valid: {choices(names)}"
            )
    if not path.exists():
        raise FedbenchError(f"{path}: no such profile file")
    if path.is_dir():
        raise FedbenchError(f"{path}: a directory, not a profile YAML file")
    try:  # size, lines, nesting and aliases before the YAML is composed
        data = bounded.load_yaml(path, str(path), bounded.PROFILE_YAML, UniqueKeyLoader)
    except UnicodeDecodeError:
        raise FedbenchError(f"{path}: not a text file (a profile is YAML text)") from None
    except OSError as exc:
        raise FedbenchError(f"{path}: cannot read the profile ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FedbenchError(f"{path}{where}: not valid YAML: {problem}") from None
    return parse_profile(data, str(path), expected_name=path.stem)


def parse_profile(data: object, file: str, expected_name: str | None = None) -> DeviceProfile:
    """Validate parsed YAML as a profile (see the module docstring)."""
    reader = Reader(file)
    if isinstance(data, Mapping) and "clusters" in data and isinstance(data["clusters"], list):
        raise reader.fail("clusters", "expected a mapping of cluster name -> cluster")
    profile = reader.build(DeviceProfile, data)
    _check(profile, reader, expected_name)
    return profile


def _check(p: DeviceProfile, r: Reader, expected_name: str | None) -> None:
    consts = load_constants()
    if expected_name is not None and p.name != expected_name:
        raise r.fail("name", f"expected '{expected_name}' (the file name), got {p.name!r}")
    if p.kind not in KINDS:
        raise r.fail("kind", f"expected one of {choices(KINDS)}, got {p.kind!r}")
    if not p.clusters:
        raise r.fail("clusters", "expected at least one cluster")
    top = 0.0
    for c in p.clusters:
        at = f"clusters.{c.name}"
        if c.arch not in consts.archs.arch:
            raise r.fail(
                f"{at}.arch",
                f"expected one of {choices(consts.archs.arch)}{closest(c.arch, consts.archs.arch)}"
                f", got {c.arch!r}",
            )
        steps = c.dvfs_ghz
        if not steps or list(steps) != sorted(set(steps)):
            raise r.fail(
                f"{at}.dvfs_ghz", f"expected strictly increasing GHz steps, got {list(steps)}"
            )
        if abs(steps[-1] - c.max_freq_ghz) > 1e-6:
            raise r.fail(
                f"{at}.max_freq_ghz",
                f"expected the top DVFS step {steps[-1]:g} GHz, got {c.max_freq_ghz:g}",
            )
        top = max(top, c.max_freq_ghz)
    if p.memory.train_budget_mb > p.memory.total_mb:
        raise r.fail("memory.train_budget_mb", f"expected at most total_mb={p.memory.total_mb}")
    temps = [t.temp_c for t in p.thermal.trips]
    if temps != sorted(set(temps)):
        raise r.fail("thermal.trips", f"expected increasing trip temperatures, got {temps}")
    caps = [t.cap_ghz for t in p.thermal.trips]
    if caps != sorted(caps, reverse=True) or any(cap > top for cap in caps):
        raise r.fail("thermal.trips", f"expected decreasing caps at most {top:g} GHz, got {caps}")
    if temps and p.thermal.critical_c <= temps[-1]:
        raise r.fail("thermal.critical_c", f"expected above the last trip ({temps[-1]:g} C)")
    for i, (start, end) in enumerate(p.availability.hours):
        if start == end:
            raise r.fail(
                f"availability.hours.{i}", "expected start != end (use [0, 24] for always)"
            )
    for i, (start, end, _) in enumerate(p.memory.pressure):
        if start == end:
            raise r.fail(f"memory.pressure.{i}", "expected start hour != end hour")
    if p.framework.name not in consts.fitted.cpu:
        raise r.fail(
            "framework.name",
            f"expected one of {choices(consts.fitted.cpu)}, got {p.framework.name!r}",
        )
    if p.framework.threads > p.total_cores:
        raise r.fail("framework.threads", f"expected at most the {p.total_cores} cores")
    if p.framework.conv_backend not in CONV_BACKENDS:
        raise r.fail(
            "framework.conv_backend",
            f"expected one of {choices(CONV_BACKENDS)}, got {p.framework.conv_backend!r}",
        )
    if p.os.governor not in GOVERNORS:
        raise r.fail("os.governor", f"expected one of {choices(GOVERNORS)}, got {p.os.governor!r}")
    if p.memory.resident_mb > p.memory.total_mb:
        raise r.fail("memory.available_mb", f"expected at most total_mb={p.memory.total_mb}")
    if p.gpu is not None and p.gpu.framework not in consts.fitted.gpu:
        raise r.fail(
            "gpu.framework",
            f"expected one of {choices(consts.fitted.gpu)}, got {p.gpu.framework!r}",
        )
    if p.kind == "phone" and p.battery.capacity_wh is None:
        raise r.fail("battery.capacity_wh", "expected a capacity in Wh for a phone")
    _check_sources(p, r)


def _check_sources(p: DeviceProfile, r: Reader) -> None:
    valid = set(all_paths(p)) - {"sources", "name", "kind", "soc"}
    for key, text in p.sources.items():
        if key not in valid:
            raise r.fail(f"sources.{key}", f"not a field of the profile{closest(key, valid)}")
        if not text.strip():
            raise r.fail(f"sources.{key}", "expected a citation or how the number was derived")
    for path in numeric_paths(p):
        parts = path.split(".")
        ancestors = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        if not ancestors & set(p.sources):
            raise r.fail(
                f"sources.{path}",
                "missing: every number needs a source (this field, or a section above it)",
            )


def initial_state(profile: DeviceProfile, now_s: float) -> DeviceState:
    """A device that has been idle a long time: at its idle temperature, fully charged."""
    return DeviceState(temp_c=profile.thermal.ambient_c, battery_pct=100.0, time_s=now_s)
