"""Paper 002 section 4.7.1 (Fig 16): training in the foreground vs in the background.

The same step at foreground and at background priority while the user's
apps run. Emulated, the background share of the CPU is the profile's
`os.background_share` (paper 002's phone: 1/3; a dedicated board ~0.9).
Measured on this host, the apps are one busy process per training CPU and
priority is the niceness (host.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.characterize.device import Device, StepJob, StepResult
from fedbench.characterize.models import ModelRef
from fedbench.characterize.output import (
    Row,
    StudyResult,
    fmt,
    legend,
    pyplot,
    ratio,
    save,
    write_csv,
)
from fedbench.characterize.studies.base import Study, pick_models, positive

PRIORITIES: tuple[str, ...] = ("foreground", "background")


@dataclass(frozen=True, kw_only=True)
class Background(Study):
    models: tuple[str, ...]
    paper_models: tuple[str, ...]
    batch_size: int

    name: ClassVar[str] = "background"
    paper: ClassVar[str] = "paper 002 Fig 16 (background training ~3x slower)"
    columns: ClassVar[dict[str, str]] = {
        "device": "profile name, or `this`",
        "kind": "`emulated` or `measured`",
        "model": "zoo model",
        "batch_size": "samples per step",
        "priority": "`foreground` or `background`",
        "status": "`ok` or `oom`",
        "reason": "why a row is not ok",
        "step_latency_s": "one training step, s (measured: the median timed step)",
        "slowdown": "step_latency_s / the foreground row's",
        "energy_j": "energy of one step, J (empty: no power sensor)",
        "avg_power_w": "energy_j / step_latency_s, W",
    }

    def __post_init__(self) -> None:
        pick_models(self.models, self.paper_models, f"{self.name}.models")
        positive((self.batch_size,), f"{self.name}.batch_size")

    def run(self, device: Device, out: Path) -> StudyResult:
        rows: list[Row] = []
        for model in pick_models(self.models, self.paper_models, "models"):
            ref = ModelRef(model)
            results = {
                p: device.step(StepJob(ref, self.batch_size, priority=p)) for p in PRIORITIES
            }
            fg = results["foreground"].step_latency_s
            rows += [self.row(device, model, p, r, fg) for p, r in results.items()]
        csv = write_csv(out / f"{self.name}.csv", self.columns, rows)
        fig = plot(rows, out / "background.png")
        return StudyResult(self.name, device.name, csv, (fig,), tuple(summarise(rows)))

    def row(self, device: Device, model: str, priority: str, r: StepResult, fg_s: float) -> Row:
        return {
            "device": device.name,
            "kind": device.kind,
            "model": model,
            "batch_size": self.batch_size,
            "priority": priority,
            "status": r.status,
            "reason": r.reason,
            "step_latency_s": r.step_latency_s,
            "slowdown": ratio(r.step_latency_s, fg_s),
            "energy_j": r.energy_j,
            "avg_power_w": r.avg_power_w,
        }


def summarise(rows: list[Row]) -> list[str]:
    return [
        f"{r['model']}: background x{fmt(r['slowdown'])} slower than foreground (paper 002: ~3x)"
        for r in rows
        if r["priority"] == "background"
    ]


def plot(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, ax = plt.subplots(figsize=(2.2 * len(models) + 3, 4))
    for i, priority in enumerate(PRIORITIES):
        values = [
            next(r["step_latency_s"] for r in rows if r["model"] == m and r["priority"] == priority)
            for m in models
        ]
        xs = [j + (i - 0.5) * 0.38 for j in range(len(models))]
        bars = ax.bar(xs, values, 0.38, label=priority)
        if priority == "background":
            for bar, m in zip(bars, models, strict=True):
                slow = next(
                    r["slowdown"] for r in rows if r["model"] == m and r["priority"] == priority
                )
                ax.annotate(
                    f"x{fmt(slow, '.2g')}",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                )
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("step latency (s)")
    legend(ax)
    ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"foreground vs background training (paper 002 Fig 16) on {rows[0]['device']}")
    return save(fig, path)
