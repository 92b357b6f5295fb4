"""Paper 001's CPU table: big / little / hybrid cores x high / medium / low clock.

Each configuration pins the training threads to 1, 2, 4... cores of one
group (big: every cluster but the slowest; little: the slowest; hybrid: all
cores) and caps the clock at the highest (H), a middle (M) or the lowest
(L) DVFS step. Paper 001 (Meizu-class Snapdragon 855, MNN) found four big
cores at H fastest and one little core at L the least energy (43.7% of the
fastest configuration's energy, 28.9x slower). Its energies are above
idle (3.1 J over 57.8 s is far below any phone's idle draw), so the least
energy is judged on `energy_active_j`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.characterize.device import CpuConfig, Device, StepJob, StepResult
from fedbench.characterize.models import ModelRef
from fedbench.characterize.output import (
    Row,
    StudyResult,
    fmt,
    legend,
    log_y,
    pyplot,
    ratio,
    save,
    write_csv,
)
from fedbench.characterize.studies.base import Study, pick_models


@dataclass(frozen=True, kw_only=True)
class CpuConfigStudy(Study):
    model: str
    batch_size: int

    name: ClassVar[str] = "cpu_config"
    paper: ClassVar[str] = "paper 001 CPU-configuration table (time and energy)"
    columns: ClassVar[dict[str, str]] = {
        "device": "profile name, or `this`",
        "kind": "`emulated` or `measured`",
        "model": "zoo model",
        "batch_size": "samples per step",
        "config": "`<group> <cores>x <level>`, e.g. `big 4x H`",
        "group": "`big`, `little`, `hybrid`, or `all` on a device with one kind of core",
        "cores": "training threads, one per pinned core",
        "level": "`H` highest, `M` middle, `L` lowest clock",
        "cores_used": "emulated: profile clusters (`+`-joined); measured: CPU ids",
        "freq_cap_ghz": "emulated: the clock cap applied (empty = none); measured: empty",
        "freq_ghz": "clock the threads ran at, GHz (measured: sampled, empty without cpufreq)",
        "status": "`ok`, `oom`, or `unavailable` (the host cannot set this clock)",
        "reason": "why a row is not ok",
        "step_latency_s": "one training step, s (measured: the median timed step)",
        "energy_j": "whole-device energy of one step, J",
        "energy_active_j": "energy above the device's idle draw, J (paper 001's figure)",
        "avg_power_w": "energy_j / step_latency_s, W",
    }

    def __post_init__(self) -> None:
        pick_models((self.model,), (), f"{self.name}.model")

    def run(self, device: Device, out: Path) -> StudyResult:
        rows = [
            self.row(device, cfg, device.step(StepJob(ModelRef(self.model), self.batch_size, cfg)))
            for cfg in device.cpu_configs()
        ]
        csv = write_csv(out / f"{self.name}.csv", self.columns, rows)
        return StudyResult(
            self.name,
            device.name,
            csv,
            (plot(rows, out / "cpu_config.png"),),
            tuple(summarise(rows)),
        )

    def row(self, device: Device, cfg: CpuConfig, r: StepResult) -> Row:
        return {
            "device": device.name,
            "kind": device.kind,
            "model": self.model,
            "batch_size": self.batch_size,
            "config": cfg.label,
            "group": cfg.group,
            "cores": cfg.cores,
            "level": cfg.level,
            "cores_used": "+".join(cfg.clusters) or "+".join(map(str, cfg.cpus)),
            "freq_cap_ghz": cfg.freq_cap_ghz,
            "freq_ghz": r.freq_ghz,
            "status": r.status,
            "reason": r.reason,
            "step_latency_s": r.step_latency_s,
            "energy_j": r.energy_j,
            "energy_active_j": r.energy_active_j,
            "avg_power_w": r.avg_power_w,
        }


def _best(rows: list[Row], key: str) -> Row | None:
    ok = [r for r in rows if r["status"] == "ok" and math.isfinite(r[key])]
    return min(ok, key=lambda r: r[key]) if ok else None


def summarise(rows: list[Row]) -> list[str]:
    fastest = _best(rows, "step_latency_s")
    if fastest is None:
        return ["no configuration ran"]
    lines = [f"fastest: {fastest['config']} ({fmt(fastest['step_latency_s'])} s/step)"]
    frugal = _best(rows, "energy_active_j")
    if frugal is None:
        lines.append("least energy: not measurable on this device (no power sensor)")
    else:
        slow = ratio(frugal["step_latency_s"], fastest["step_latency_s"])
        share = ratio(frugal["energy_active_j"], fastest["energy_active_j"])
        lines.append(
            f"least energy above idle: {frugal['config']} ({fmt(frugal['energy_active_j'])} J), "
            f"{fmt(100 * share)}% of the fastest's, {fmt(slow)}x slower "
            "(paper 001: little 1x L, 43.7%, 28.9x)"
        )
    missing = sum(r["status"] == "unavailable" for r in rows)
    if missing:
        lines.append(f"{missing} configurations unavailable: {rows[-1]['reason'] or 'see CSV'}")
    return lines


def plot(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    configs = list(dict.fromkeys(f"{r['group']} {r['cores']}x" for r in rows))
    levels = list(dict.fromkeys(r["level"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / max(1, len(levels))
    for ax, key, label in (
        (axes[0], "step_latency_s", "step latency (s)"),
        (axes[1], "energy_active_j", "energy above idle per step (J)"),
    ):
        for i, level in enumerate(levels):
            values = []
            for c in configs:
                match = [
                    r[key]
                    for r in rows
                    if f"{r['group']} {r['cores']}x" == c and r["level"] == level
                ]
                # An unavailable or unmeasurable cell is no bar, not a zero bar.
                values.append(match[0] if match and math.isfinite(match[0]) else math.nan)
            xs = [j + (i - (len(levels) - 1) / 2) * width for j in range(len(configs))]
            ax.bar(xs, values, width, label=level)
        ax.set_xticks(range(len(configs)), configs, rotation=30, ha="right")
        ax.set_ylabel(label)
        shown = [r[key] for r in rows if math.isfinite(r[key]) and r[key] > 0]
        # Little 1x L is ~30x slower than big 4x H: a log axis. Under a decade (a host
        # without cpufreq: 1 vs 2 cores) bars from zero compare honestly; on a log axis
        # they start wherever the axis does.
        if shown and max(shown) >= 10 * min(shown):
            log_y(ax)
        ax.grid(alpha=0.3, axis="y")
        if not shown:
            ax.set_yticks([])
            ax.text(0.5, 0.5, "not measurable on this device", ha="center", transform=ax.transAxes)
    legend(axes[0], title="clock")
    fig.suptitle(
        f"CPU configurations (paper 001) on {rows[0]['device']}: {rows[0]['model']}, "
        f"batch {rows[0]['batch_size']}"
    )
    return save(fig, path)
