"""The profile profile_device writes: measured where it can, a stated assumption elsewhere.

`Measured` holds what the device told us (description, idle and bench
figures from the probe); `base_profile` turns it into profile YAML data
with the clusters at their nominal clocks (fit.py fits their effective
clock, arch, bandwidth and framework), and `sources` writes the `sources:`
entry of every numeric field: "measured by profile_device on <date>: ..."
for what was measured or fitted, "not measured by profile_device ...:
assumed ..." for what a device cannot report about itself (network,
thermal time constant, ...).
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fedbench.measure.probe.sysfs import read_int, read_text
from fedbench.profiling.describe import DeviceDescription
from fedbench.profiling.fit import KERNELS, PARAMS, Fit

# When a device exposes no clock, its clusters are fitted from this nominal value.
UNKNOWN_CLOCK_GHZ = 1.0
ASSUMED = {
    "idle_w": 3.0,
    "core_power_w": 1.0,
    "mem_w_per_gbs": 0.08,
    "voltage_floor": 0.6,
    "ambient_c": 40.0,
    "resistance_c_per_w": 10.0,
    "time_constant_s": 180.0,
    "critical_c": 95.0,
    "swap_gbs": 0.1,
}


@dataclass(frozen=True)
class Measured:
    description: DeviceDescription
    name: str
    kind: str
    threads: int
    runtime_rss_mb: float  # this process with torch + fedbench loaded: what a client costs
    idle_w: float  # NaN: no power sensor
    bench_w: float  # average power while benching (NaN: no sensor)
    idle_temp_c: float  # NaN: no temperature sensor
    bench_temp_c: float
    critical_c: float  # NaN: no critical trip point found
    battery_wh: float | None
    clock: str  # "cpu" (thread CPU time) or "wall"
    cases: int
    date: str = dt.date.today().isoformat()


def conv_backend() -> str:
    """The convolution library this process's torch build links (profile.Framework)."""
    return "onednn" if torch.backends.mkldnn.is_available() else "nnpack"


def soc_name(root: Path = Path("/")) -> str:
    text = read_text(root / "proc/cpuinfo") or ""
    for key in ("Hardware", "model name"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or platform.machine()


def guess_kind(root: Path = Path("/")) -> str:
    if (root / "etc/nv_tegra_release").exists():
        return "jetson"
    return "phone" if battery_wh(root) is not None else "sbc"


def battery_wh(root: Path = Path("/")) -> float | None:
    for supply in sorted((root / "sys/class/power_supply").glob("*")):
        if (read_text(supply / "type") or "") != "Battery":
            continue
        energy = read_int(supply / "energy_full")  # uWh
        if energy:
            return energy / 1e6
        charge, volts = read_int(supply / "charge_full"), read_int(supply / "voltage_min_design")
        if charge and volts:
            return charge * volts / 1e12  # uAh x uV
    return None


def critical_temp_c(root: Path = Path("/")) -> float:
    temps = []
    for trip in (root / "sys/class/thermal").glob("thermal_zone*/trip_point_*_type"):
        if (read_text(trip) or "") == "critical":
            value = read_int(trip.with_name(trip.name.replace("_type", "_temp")))
            if value and 20_000 < value < 150_000:
                temps.append(value / 1000.0)
    return min(temps) if temps else math.nan


def _ok(x: float) -> bool:
    return not math.isnan(x)


def base_profile(m: Measured) -> dict[str, Any]:
    """Profile data with nominal clocks (`nominal_ghz`, `nominal_steps`) for fit.py."""
    busy_w = m.bench_w - m.idle_w if _ok(m.bench_w) and _ok(m.idle_w) else math.nan
    core_w = busy_w / m.threads if _ok(busy_w) and busy_w > 0 else ASSUMED["core_power_w"]
    clusters = {}
    for c in m.description.clusters:
        top = c.max_freq_ghz or UNKNOWN_CLOCK_GHZ
        steps = [s for s in c.dvfs_ghz if 0 < s <= top] or [top]
        clusters[c.name] = {
            "cores": c.cores,
            "max_freq_ghz": top,
            "dvfs_ghz": steps,
            "arch": c.arch or "a76",
            "core_power_w": round(min(10.0, max(0.005, core_w)), 4),
            "cluster_power_w": 0.0,
            "nominal_ghz": top,
            "nominal_steps": steps,
            "clock_measured": bool(c.max_freq_ghz),  # else fit.py fits the clock
        }
    total = m.description.total_mb
    budget = int(max(16, min(total, m.description.available_mb - m.runtime_rss_mb)))
    idle_c = m.idle_temp_c if _ok(m.idle_temp_c) else ASSUMED["ambient_c"]
    rise = m.bench_temp_c - m.idle_temp_c if _ok(m.bench_temp_c) and _ok(m.idle_temp_c) else 0.0
    resistance = rise / busy_w if _ok(busy_w) and busy_w > 0.5 and rise > 0.5 else math.nan
    critical = m.critical_c if _ok(m.critical_c) else ASSUMED["critical_c"]
    return {
        "name": m.name,
        "kind": m.kind,
        "soc": soc_name(),
        "clusters": clusters,
        "memory": {
            "total_mb": total,
            "train_budget_mb": budget,
            "bandwidth_gbs": 10.0,
            "cache_mb": round(min(1024.0, max(0.03, m.description.cache_mb or 1.0)), 3),
            "available_mb": max(16, min(total, m.description.available_mb)),
            "swap_mb": m.description.swap_mb,
            "swap_gbs": ASSUMED["swap_gbs"],
        },
        "power": {
            "idle_w": round(m.idle_w, 3) if _ok(m.idle_w) else ASSUMED["idle_w"],
            "mem_w_per_gbs": ASSUMED["mem_w_per_gbs"],
            "voltage_floor": ASSUMED["voltage_floor"],
        },
        "thermal": {
            "ambient_c": round(min(idle_c, critical - 5.0), 2),
            "resistance_c_per_w": round(resistance, 3)
            if _ok(resistance)
            else ASSUMED["resistance_c_per_w"],
            "time_constant_s": ASSUMED["time_constant_s"],
            "hysteresis_c": 2.0,
            "trips": [],
            "critical_c": critical,
        },
        "network": {"up_mbps": 100.0, "down_mbps": 100.0, "rtt_ms": 5.0},
        "availability": {"hours": [[0, 24]]},
        "battery": {"capacity_wh": round(m.battery_wh, 3) if m.battery_wh else None},
        "framework": {
            "name": "pytorch",
            "threads": m.threads,
            "dispatch_scale": 1.0,
            "conv_backend": conv_backend(),
        },
        "os": {"background_share": 0.9, "governor": "top"},
    }


def sources(
    m: Measured, data: dict[str, Any], fit: Fit, nominal: dict[str, float]
) -> dict[str, str]:
    """A `sources:` entry for every numeric field of `data` (a fitted profile)."""
    by = f"measured by profile_device on {m.date}"
    assumed = f"not measured by profile_device on {m.date}: assumed"
    out: dict[str, str] = {}
    bound = f"; at a schema bound ({', '.join(fit.at_bound)})" if fit.at_bound else ""
    how = (
        f"fitted to {m.cases} timed training steps ({m.clock} time, {m.threads} thread(s)), "
        f"arch {fit.arch} and framework {fit.framework} chosen by the fit, rms log error "
        f"{fit.rms_log_error:.3f}{bound}"
    )
    for name, cluster in data["clusters"].items():
        group = next(c for c in m.description.clusters if c.name == name)
        at = f"clusters.{name}"
        out[f"{at}.cores"] = f"{by}: {group.cores} online CPUs {list(group.cpus)} ({group.model})"
        if "clock" in fit.free:
            out[f"{at}.max_freq_ghz"] = (
                f"{by}: effective clock = {fit.clock_scale:.4f} x nominal {nominal[name]:g} GHz "
                f"(the device exposes no clock), {how}"
            )
            out[f"{at}.dvfs_ghz"] = (
                f"{by}: the device's DVFS steps x the same factor {fit.clock_scale:.4f}"
            )
        else:
            out[f"{at}.max_freq_ghz"] = f"{by}: top clock (cpufreq / cpuinfo)"
            out[f"{at}.dvfs_ghz"] = f"{by}: the device's DVFS steps (cpufreq)"
        out[f"{at}.arch"] = f"{by}: {'from /proc/cpuinfo' if group.arch else how}"
        power = cluster["core_power_w"]
        out[f"{at}.core_power_w"] = (
            f"{by}: (bench {m.bench_w:.2f} W - idle {m.idle_w:.2f} W) / {m.threads} busy cores"
            if _ok(m.bench_w) and _ok(m.idle_w) and power != ASSUMED["core_power_w"]
            else f"{assumed} {power} W (no power sensor readable by the probe)"
        )
        out[f"{at}.cluster_power_w"] = f"{assumed} 0: not separable from core power by the bench"
    mem = data["memory"]
    out["memory.total_mb"] = f"{by}: MemTotal"
    out["memory.train_budget_mb"] = (
        f"{by}: MemAvailable {m.description.available_mb} MB minus {m.runtime_rss_mb:.0f} MB "
        "resident for a Python process with torch and fedbench loaded"
    )
    out["memory.bandwidth_gbs"] = f"{by}: effective bandwidth {mem['bandwidth_gbs']} GB/s, {how}"
    out["memory.cache_mb"] = (
        f"{by}: largest cache of cpu0 (sysfs cache/index*/size)"
        if m.description.cache_mb
        else f"{assumed} {mem['cache_mb']} MB (no cache size in sysfs)"
    )
    out["memory.available_mb"] = f"{by}: MemAvailable (what the OS leaves resident to a process)"
    out["memory.swap_mb"] = f"{by}: SwapTotal"
    out["memory.swap_gbs"] = f"{assumed} {mem['swap_gbs']} GB/s (swap device not benchmarked)"
    power = data["power"]
    out["power.idle_w"] = (
        f"{by}: probe average over an idle period"
        if _ok(m.idle_w)
        else f"{assumed} {power['idle_w']} W (no power sensor readable by the probe)"
    )
    out["power.mem_w_per_gbs"] = f"{assumed} {power['mem_w_per_gbs']} (LPDDR4-class DRAM)"
    out["power.voltage_floor"] = f"{assumed} {power['voltage_floor']} (a flat DVFS curve)"
    t = data["thermal"]
    out["thermal.ambient_c"] = (
        f"{by}: hottest sensor while idle"
        if _ok(m.idle_temp_c)
        else f"{assumed} {t['ambient_c']} C (no temperature sensor)"
    )
    out["thermal.resistance_c_per_w"] = (
        f"{by}: temperature rise over the bench / power above idle (a lower bound: the bench "
        "does not reach equilibrium)"
        if t["resistance_c_per_w"] != ASSUMED["resistance_c_per_w"]
        else f"{assumed} {t['resistance_c_per_w']} C/W (no temperature rise and power measured)"
    )
    out["thermal.time_constant_s"] = f"{assumed} {t['time_constant_s']} s"
    out["thermal.hysteresis_c"] = f"{assumed} 2 C"
    out["thermal.trips"] = (
        f"not measured by profile_device on {m.date}: none listed (the short bench does not "
        "heat the device to its throttling points; add the trips a long load shows)"
    )
    out["thermal.critical_c"] = (
        f"{by}: lowest critical trip point of the thermal zones"
        if _ok(m.critical_c)
        else f"{assumed} {t['critical_c']} C (no critical trip point readable)"
    )
    out["network"] = f"{assumed} a 100 Mbit/s LAN link with 5 ms RTT; edit for the device's link"
    out["availability"] = f"{assumed} always available"
    if data["battery"]["capacity_wh"] is not None:
        out["battery.capacity_wh"] = f"{by}: power_supply energy_full"
    out["framework.threads"] = f"{by}: torch threads used by the bench"
    out["framework.name"] = (
        f"{by}: the framework constants (kernel speed, per-pass overhead) that fit best; "
        "the bench itself ran PyTorch"
    )
    out["framework.dispatch_scale"] = (
        f"{by}: this build's per-call framework cost relative to the fitted constants, {how}"
    )
    for kernel in KERNELS:
        state = "fitted" if kernel in fit.free else "not fitted (the clock scale stands in)"
        out[f"framework.kernel_scale.{kernel}"] = (
            f"{by}: {PARAMS[kernel].meaning} of the fitted {fit.framework} constants, {state}; "
            f"{how}"
        )
    out["os.background_share"] = f"{assumed} 0.9 (a dedicated device; not benchmarked)"
    out["os.governor"] = f"{assumed} top (busy cores at their top clock, as the bench ran)"
    return out
