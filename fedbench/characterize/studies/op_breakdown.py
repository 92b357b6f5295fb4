"""Papers 001/002: where a training step's time goes, by phase and operator class.

Paper 002 (Fig 11, a four-layer conv-only stack on a Pixel 2) found the
backward pass ~70% of training time and gradient computation 65% of it;
paper 001 broke MNN's step down by operator. Each row is one (phase, op
class) cell of one step: forward / backward per class, the optimizer
update, and the rest ("other": framework overhead and the input pipeline
when emulated; time outside the three phases when measured). Measured
cells come from torch.profiler over one step after the warm-up
(fedbench.measure.opprofile), so their classes also hold `other` (views,
allocation) and `untracked` (Python and autograd-engine time between ops).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.characterize.device import Device, PhaseTime
from fedbench.characterize.models import ModelRef
from fedbench.characterize.output import Row, StudyResult, fmt, pyplot, save, write_csv
from fedbench.characterize.studies.base import Study, pick_models, positive

PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "other")


@dataclass(frozen=True, kw_only=True)
class OpBreakdown(Study):
    models: tuple[str, ...]
    paper_models: tuple[str, ...]
    batch_size: int

    name: ClassVar[str] = "op_breakdown"
    paper: ClassVar[str] = (
        "paper 002 Fig 11 (gradient computation ~65% of training time), paper 001"
    )
    columns: ClassVar[dict[str, str]] = {
        "device": "profile name, or `this`",
        "kind": "`emulated` or `measured`",
        "model": "zoo model",
        "batch_size": "samples per step",
        "status": "`ok`, or `oom` (no cells then)",
        "phase": "`forward`, `backward`, `optimizer` or `other`",
        "op_class": "dense, depthwise, elementwise, movement (emulated and measured); update "
        "(optimizer), overhead, input (emulated other); other, untracked (measured)",
        "time_s": "time of this cell in one step, s",
        "share": "time_s / the step's total time",
    }

    def __post_init__(self) -> None:
        pick_models(self.models, self.paper_models, f"{self.name}.models")
        positive((self.batch_size,), f"{self.name}.batch_size")

    def run(self, device: Device, out: Path) -> StudyResult:
        rows: list[Row] = []
        for model in pick_models(self.models, self.paper_models, "models"):
            status, cells = device.phase_times(ModelRef(model), self.batch_size)
            rows += self.rows(device, model, status, cells)
        csv = write_csv(out / f"{self.name}.csv", self.columns, rows)
        fig = plot(rows, out / "op_breakdown.png")
        return StudyResult(self.name, device.name, csv, (fig,), tuple(summarise(rows)))

    def rows(self, device: Device, model: str, status: str, cells: list[PhaseTime]) -> list[Row]:
        base = {
            "device": device.name,
            "kind": device.kind,
            "model": model,
            "batch_size": self.batch_size,
            "status": status,
        }
        if not cells:
            return [
                {**base, "phase": "", "op_class": "", "time_s": float("nan"), "share": float("nan")}
            ]
        # A class with no ops in a phase has no cell (rather than a row of zeros).
        cells = [c for c in cells if c.time_s > 0]
        total = sum(c.time_s for c in cells)
        return [
            {
                **base,
                "phase": c.phase,
                "op_class": c.op_class,
                "time_s": c.time_s,
                "share": c.time_s / total if total > 0 else float("nan"),
            }
            for c in cells
        ]


def phase_shares(rows: list[Row], model: str) -> dict[str, float]:
    mine = [r for r in rows if r["model"] == model and r["status"] == "ok"]
    return {p: sum(r["share"] for r in mine if r["phase"] == p) for p in PHASES}


def summarise(rows: list[Row]) -> list[str]:
    lines = []
    for model in dict.fromkeys(r["model"] for r in rows):
        if not any(r["model"] == model and r["status"] == "ok" for r in rows):
            lines.append(
                f"{model}: did not run ({next(r['status'] for r in rows if r['model'] == model)})"
            )
            continue
        s = phase_shares(rows, model)
        dense_bwd = sum(
            r["share"]
            for r in rows
            if r["model"] == model and r["phase"] == "backward" and r["op_class"] == "dense"
        )
        lines.append(
            f"{model}: forward {fmt(100 * s['forward'])}%, backward {fmt(100 * s['backward'])}% "
            f"(dense gradient kernels {fmt(100 * dense_bwd)}%), optimizer "
            f"{fmt(100 * s['optimizer'])}%, other {fmt(100 * s['other'])}% "
            "(paper 002: backward ~70%, gradients 65%)"
        )
    return lines


def plot(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    models = [
        m
        for m in dict.fromkeys(r["model"] for r in rows)
        if any(r["model"] == m and r["status"] == "ok" for r in rows)
    ]
    classes = list(dict.fromkeys(r["op_class"] for r in rows if r["status"] == "ok"))
    skipped = [f"{r['model']} ({r['status']})" for r in rows if r["status"] != "ok"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.6 * max(3, len(models)) + 2.6))
    for ax, (field, keys) in zip(
        axes, (("phase", PHASES), ("op_class", tuple(classes))), strict=True
    ):
        left = [0.0] * len(models)
        # More classes than the default cycle's ten colours: dense and swap shared one.
        colours = plt.get_cmap("tab10" if len(keys) <= 10 else "tab20").colors
        for i, key in enumerate(keys):
            widths = [
                100 * sum(r["share"] for r in rows if r["model"] == m and r[field] == key)
                for m in models
            ]
            ax.barh(models, widths, left=left, label=key, color=colours[i % len(colours)])
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlabel(f"share of step time by {field.replace('_', ' ')} (%)")
        ax.set_xlim(0, 100)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4)
    title = (
        f"training-step breakdown on {rows[0]['device']} ({rows[0]['kind']}), "
        f"batch {rows[0]['batch_size']}"
    )
    # The models that did not run go on a line of their own: one long line is cut off.
    fig.suptitle(title + (f"\nnot run: {', '.join(skipped)}" if skipped else ""))
    return save(fig, path)
