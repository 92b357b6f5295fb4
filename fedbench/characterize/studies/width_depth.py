"""Paper 002 Tables 4-5 and Figs 6, 8, 10: layer-only stacks across depth and width.

Fully-connected-only and convolution-only stacks (fedbench.models.layer_only)
for every depth x width of the grid, at paper 002's batch of 128 CIFAR-10
images: parameters of the stack (what Tables 4-5 count), training and
inference FLOPs, training and inference time. The depthwise comparison
(Fig 10) sets a depthwise-separable stack next to the standard convolution
at `dw_depths` across the widths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.characterize.device import Device, StepJob
from fedbench.characterize.models import ModelRef, check_models, stack_params
from fedbench.characterize.output import (
    Row,
    StudyResult,
    fmt,
    legend,
    log2_axis,
    log_y,
    pyplot,
    ratio,
    save,
    write_csv,
)
from fedbench.characterize.studies.base import Study, positive
from fedbench.characterize.workloads import forward_pass

DWCONV = "dwconv_only"
CONV = "conv_only"


@dataclass(frozen=True, kw_only=True)
class WidthDepth(Study):
    families: tuple[str, ...]
    depths: tuple[int, ...]
    widths: tuple[int, ...]
    dw_depths: tuple[int, ...]
    batch_size: int

    name: ClassVar[str] = "width_depth"
    paper: ClassVar[str] = "paper 002 Tables 4-5, Figs 6, 8 and 10 (Pixel 2, batch 128)"
    columns: ClassVar[dict[str, str]] = {
        "device": "profile name, or `this`",
        "kind": "`emulated` or `measured`",
        "family": "`fc_only`, `conv_only` or `dwconv_only` (fedbench/conf/model)",
        "depth": "layers in the stack",
        "width": "units (fc) or channels (conv) per layer",
        "batch_size": "samples per step",
        "stack_params": "parameters of the layer stack, without the class head (Tables 4-5)",
        "train_gflop": "one training step (forward, backward, update), GFLOP",
        "infer_gflop": "one forward pass, GFLOP",
        "status": "`ok` or `oom` (training does not fit the device)",
        "reason": "why a row is not ok",
        "train_latency_s": "one training step, s (measured: the median timed step)",
        "infer_latency_s": "one forward pass (inference), s (measured: the median)",
        "train_energy_j": "energy of one training step, J (empty: no power sensor)",
        "peak_mem_mb": "training peak memory, MB (as in batch_sweep)",
        "mem_budget_mb": "the device's training budget (measured: MemAvailable), MB",
        "workload_source": "`measured` or the two batches it was extrapolated from",
    }

    def __post_init__(self) -> None:
        check_models(self.families, f"{self.name}.families")
        positive(self.depths, f"{self.name}.depths")
        positive(self.widths, f"{self.name}.widths")
        positive((self.batch_size,), f"{self.name}.batch_size")

    def cells(self) -> list[tuple[str, int, int]]:
        grid = [(f, d, w) for f in self.families for d in self.depths for w in self.widths]
        dw = [(fam, d, w) for fam in (CONV, DWCONV) for d in self.dw_depths for w in self.widths]
        return list(dict.fromkeys(grid + dw))

    def run(self, device: Device, out: Path) -> StudyResult:
        rows = [self.row(device, *cell) for cell in self.cells()]
        csv = write_csv(out / f"{self.name}.csv", self.columns, rows)
        figures = (plot_grid(rows, out / "width_depth.png"), plot_dw(rows, out / "depthwise.png"))
        return StudyResult(self.name, device.name, csv, figures, tuple(summarise(rows)))

    def row(self, device: Device, family: str, depth: int, width: int) -> Row:
        ref = ModelRef(family, (("depth", depth), ("width", width)))
        train = device.step(StepJob(ref, self.batch_size))
        infer = device.step(StepJob(ref, self.batch_size, forward_only=True))
        module, _ = device.book.model(ref)
        return {
            "device": device.name,
            "kind": device.kind,
            "family": family,
            "depth": depth,
            "width": width,
            "batch_size": self.batch_size,
            "stack_params": stack_params(module),
            "train_gflop": train.workload.total_flops / 1e9,
            "infer_gflop": forward_pass(train.workload).total_flops / 1e9,
            "status": train.status,
            "reason": train.reason,
            "train_latency_s": train.step_latency_s,
            "infer_latency_s": infer.step_latency_s,
            "train_energy_j": train.energy_j,
            "peak_mem_mb": train.peak_mem_mb,
            "mem_budget_mb": train.mem_budget_mb,
            "workload_source": train.workload_source,
        }


def _cell(rows: list[Row], family: str, depth: int, width: int, key: str) -> float:
    for r in rows:
        if (r["family"], r["depth"], r["width"]) == (family, depth, width):
            return float(r[key]) if r["status"] == "ok" else math.nan
    return math.nan


def _growth(rows: list[Row], family: str, along: str, key: str) -> list[float]:
    """Growth of `key` from the smallest to the largest depth (or width), per other axis."""
    fam = [r for r in rows if r["family"] == family]
    depths = sorted({r["depth"] for r in fam})
    widths = sorted({r["width"] for r in fam})
    if along == "depth":
        pairs = [((depths[0], w), (depths[-1], w)) for w in widths]
    else:
        pairs = [((d, widths[0]), (d, widths[-1])) for d in depths]
    return [ratio(_cell(fam, family, *b, key), _cell(fam, family, *a, key)) for a, b in pairs]


def _span(values: list[float]) -> str:
    ok = [v for v in values if math.isfinite(v)]
    return f"x{fmt(min(ok))}-x{fmt(max(ok))}" if ok else "n/a"


def summarise(rows: list[Row]) -> list[str]:
    lines = []
    for family in dict.fromkeys(r["family"] for r in rows if r["family"] != DWCONV):
        depth = _growth(rows, family, "depth", "train_latency_s")
        width = _growth(rows, family, "width", "train_latency_s")
        oom = [
            f"{r['depth']}x{r['width']}"
            for r in rows
            if r["family"] == family and r["status"] == "oom"
        ]
        lines.append(
            f"{family}: train time, shallowest->deepest {_span(depth)}, "
            f"narrowest->widest {_span(width)}" + (f"; oom at depth x width {oom}" if oom else "")
        )
    dw = [r for r in rows if r["family"] == DWCONV]
    for d in sorted({r["depth"] for r in dw}):
        w = max(r["width"] for r in dw if r["depth"] == d)
        ratios = {
            key: ratio(_cell(rows, DWCONV, d, w, key), _cell(rows, CONV, d, w, key))
            for key in ("train_latency_s", "infer_latency_s")
        }
        lines.append(
            f"depthwise vs conv at depth {d}, width {w}: train time "
            f"x{fmt(ratios['train_latency_s'])}, inference x{fmt(ratios['infer_latency_s'])} "
            "(paper 002, one layer: x0.33 and x0.5)"
        )
    return lines


def plot_grid(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    families = list(dict.fromkeys(r["family"] for r in rows if r["family"] != DWCONV))
    fig, axes = plt.subplots(2, len(families), figsize=(5.5 * len(families), 7.5), squeeze=False)
    for col, family in enumerate(families):
        fam = [r for r in rows if r["family"] == family]
        for row_i, (key, label) in enumerate(
            (("train_latency_s", "training time (s)"), ("infer_latency_s", "inference time (s)"))
        ):
            ax = axes[row_i][col]
            for depth in sorted({r["depth"] for r in fam}):
                pts = [
                    (r["width"], r[key]) for r in fam if r["depth"] == depth and r["status"] == "ok"
                ]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=f"depth {depth}")
            ooms = [r["width"] for r in fam if r["status"] == "oom"]
            log2_axis(ax, sorted({r["width"] for r in fam}))
            log_y(ax)
            ax.set_xlabel("width")
            ax.set_ylabel(label)
            ax.set_title(family + (f" (oom cells: {len(ooms)})" if ooms else ""), fontsize=10)
            ax.grid(alpha=0.3, which="both")
            legend(ax, fontsize=8)
    fig.suptitle(
        f"depth x width (paper 002 Figs 6, 8) on {rows[0]['device']}, batch {rows[0]['batch_size']}"
    )
    return save(fig, path)


def plot_dw(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    depths = sorted({r["depth"] for r in rows if r["family"] == DWCONV})
    for ax, (key, label) in zip(
        axes,
        (("train_latency_s", "training time (s)"), ("infer_latency_s", "inference time (s)")),
        strict=True,
    ):
        for family in (CONV, DWCONV):
            for d in depths:
                pts = [
                    (r["width"], r[key])
                    for r in rows
                    if r["family"] == family and r["depth"] == d and r["status"] == "ok"
                ]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=f"{family} depth {d}")
        log2_axis(ax, sorted({r["width"] for r in rows}))
        log_y(ax)
        ax.set_xlabel("width")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        legend(ax, fontsize=8)
    fig.suptitle(
        f"depthwise-separable vs standard convolution (paper 002 Fig 10) on {rows[0]['device']}"
    )
    return save(fig, path)
