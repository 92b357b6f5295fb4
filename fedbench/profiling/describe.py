"""What a device can tell about itself: CPU clusters, clocks and memory.

Read from /proc/cpuinfo (per core: model, or ARM implementer and part),
cpufreq (per core: max clock and DVFS steps) and psutil (memory). Cores
with the same part and max clock form a cluster, as on big.LITTLE SoCs.
An ARM part number names the core (0xd08 = Cortex-A72), which is how the
emulator's arch table (fedbench/devices/arch_specs.yaml) is matched;
x86 cores with AVX2+FMA are `x86_avx2`; other cores report `arch=None`.

Used by `python -m fedbench.device --profile auto` (the one-line summary
a physical device announces to the server) and by
`python -m fedbench.profile_device` (the clusters of the profile it fits).
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

import psutil

from fedbench.measure.probe.sysfs import read_int, read_text

# (implementer, part) of /proc/cpuinfo -> the arch key of arch_specs.yaml.
ARM_PARTS: dict[tuple[str, str], str] = {
    ("0x41", "0xd03"): "a53",
    ("0x41", "0xd05"): "a55",
    ("0x41", "0xd07"): "a57",
    ("0x41", "0xd08"): "a72",
    ("0x41", "0xd09"): "a73",
    ("0x41", "0xd0b"): "a76",
    ("0x51", "0x801"): "a53",  # Kryo 2xx Silver (A53-derived)
    ("0x51", "0x800"): "a73",  # Kryo 2xx Gold (A73-derived)
    ("0x51", "0x805"): "a55",  # Kryo 4xx Silver
    ("0x51", "0x804"): "a76",  # Kryo 4xx Gold
    ("0x4e", "0x003"): "denver2",
    ("0x4e", "0x004"): "carmel",
}


@dataclass(frozen=True)
class CoreGroup:
    """Cores sharing a microarchitecture and a max clock."""

    name: str  # e.g. "cluster0"
    cpus: tuple[int, ...]
    model: str  # "ARM 0x41:0xd08" or the model name (x86)
    arch: str | None  # arch_specs.yaml key, None when unknown
    max_freq_ghz: float | None  # None: the device exposes no clock
    dvfs_ghz: tuple[float, ...]  # available steps, ascending (may be empty)

    @property
    def cores(self) -> int:
        return len(self.cpus)


@dataclass(frozen=True)
class DeviceDescription:
    machine: str  # e.g. "aarch64", "x86_64"
    clusters: tuple[CoreGroup, ...]
    total_mb: int
    available_mb: int
    cache_mb: float | None = None  # largest CPU cache (sysfs), None when not exposed
    swap_mb: int = 0

    @property
    def total_cores(self) -> int:
        return sum(c.cores for c in self.clusters)

    def summary(self) -> str:
        """One line for the server's ledger: what this device is."""
        parts = []
        for c in self.clusters:
            clock = f" @ {c.max_freq_ghz:.2f} GHz" if c.max_freq_ghz else ""
            parts.append(f"{c.cores}x {c.arch or c.model}{clock}")
        mem = f"{self.total_mb / 1024:.1f} GB"
        return f"auto: {self.machine}, {' + '.join(parts)}, {mem}"


def _cpuinfo(root: Path) -> dict[int, dict[str, str]]:
    text = read_text(root / "proc/cpuinfo") or ""
    cores: dict[int, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if "processor" in current and current["processor"].isdigit():
                cores[int(current["processor"])] = current
            current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip().lower()] = value.strip()
    return cores


def _online(root: Path, info: dict[int, dict[str, str]]) -> list[int]:
    text = read_text(root / "sys/devices/system/cpu/online")
    if text:
        cpus: list[int] = []
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus += list(range(int(lo), int(hi or lo) + 1))
        return cpus
    return sorted(info) or list(range(os.cpu_count() or 1))


def _model(core: dict[str, str]) -> str:
    if "cpu part" in core:
        return f"ARM {core.get('cpu implementer', '?')}:{core['cpu part']}"
    return core.get("model name") or core.get("hardware") or "unknown"


def _freqs(root: Path, cpu: int, core: dict[str, str]) -> tuple[float | None, tuple[float, ...]]:
    base = root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
    top = read_int(base / "cpuinfo_max_freq")
    steps_text = read_text(base / "scaling_available_frequencies") or ""
    steps = tuple(sorted({int(s) / 1e6 for s in steps_text.split() if s.isdigit()}))
    if top is not None:
        return top / 1e6, steps
    mhz = core.get("cpu mhz")
    if mhz:
        return float(mhz) / 1000.0, steps
    freq = psutil.cpu_freq() if root == Path("/") else None
    if freq is not None and (freq.max or freq.current):
        return (freq.max or freq.current) / 1000.0, steps
    return None, steps


def describe(root: Path = Path("/")) -> DeviceDescription:
    """This device (or a recorded fixture tree under `root`)."""
    info = _cpuinfo(root)
    groups: dict[tuple[str, float | None], list[tuple[int, tuple[float, ...]]]] = {}
    for cpu in _online(root, info):
        core = info.get(cpu, {})
        top, steps = _freqs(root, cpu, core)
        top = round(top, 3) if top is not None else None
        groups.setdefault((_model(core), top), []).append((cpu, steps))
    clusters = []
    for i, ((model, top), members) in enumerate(sorted(groups.items(), key=_fastest_last)):
        core = info.get(members[0][0], {})
        arch = ARM_PARTS.get((core.get("cpu implementer", ""), core.get("cpu part", ""))) or (
            _x86_arch(core)
        )
        steps = tuple(sorted({s for _, ss in members for s in ss}))
        clusters.append(
            CoreGroup(f"cluster{i}", tuple(c for c, _ in members), model, arch, top, steps)
        )
    if root == Path("/"):
        mem = psutil.virtual_memory()
        total, available = int(mem.total >> 20), int(mem.available >> 20)
        swap = int(psutil.swap_memory().total >> 20)
    else:
        total, available = _meminfo(root)
        swap = _meminfo_key(root, "SwapTotal")
    return DeviceDescription(
        platform.machine(), tuple(clusters), total, available, _cache_mb(root), swap
    )


def _cache_mb(root: Path) -> float | None:
    """The largest cache cpu0 sees (the last level), MB."""
    sizes = []
    for index in (root / "sys/devices/system/cpu/cpu0/cache").glob("index*"):
        text = (read_text(index / "size") or "").strip().upper()
        match = re.fullmatch(r"(\d+)([KMG]?)", text)
        if match:
            scale = {"": 1 / 2**20, "K": 1 / 1024, "M": 1.0, "G": 1024.0}[match.group(2)]
            sizes.append(int(match.group(1)) * scale)
    return max(sizes) if sizes else None


def _meminfo_key(root: Path, key: str) -> int:
    for line in (read_text(root / "proc/meminfo") or "").splitlines():
        name, _, rest = line.partition(":")
        if name == key and rest.split():
            return int(rest.split()[0]) // 1024
    return 0


def _fastest_last(item: tuple[tuple[str, float | None], object]) -> tuple[float, str]:
    (model, top), _ = item
    return (top or 0.0, model)


def _meminfo(root: Path) -> tuple[int, int]:
    text = read_text(root / "proc/meminfo") or ""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if rest.split():
            values[key] = int(rest.split()[0]) // 1024
    return values.get("MemTotal", 0), values.get("MemAvailable", values.get("MemFree", 0))


def _x86_arch(core: dict[str, str]) -> str | None:
    """x86 cores with AVX2 and FMA match the arch table's x86_avx2 entry."""
    flags = set(core.get("flags", "").split())
    return "x86_avx2" if {"avx2", "fma"} <= flags else None
