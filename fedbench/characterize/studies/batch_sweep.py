"""Paper 000 Figs 6, 8, 9: latency, throughput, energy and memory against the batch size.

For every model and batch: one steady training step's latency, throughput
(samples/s), energy per step and per sample, peak memory and its split into
weights, gradients, optimizer state, saved activations (paper 000's
"feature maps"), workspace and the input batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fedbench.characterize.device import Device, StepJob, StepResult
from fedbench.characterize.models import ModelRef
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
from fedbench.characterize.studies.base import Study, pick_models, positive
from fedbench.devices.emulator import memory_terms

# CSV column -> emulator memory term (fedbench.devices.emulator.MEMORY_TERMS).
MEMORY_COLUMNS: dict[str, str] = {
    "mem_weights_mb": "params",
    "mem_gradients_mb": "grads",
    "mem_optimizer_mb": "optimizer_state",
    "mem_activations_mb": "saved_activations",
    "mem_workspace_mb": "workspace",
    "mem_input_mb": "input",
}


@dataclass(frozen=True, kw_only=True)
class BatchSweep(Study):
    models: tuple[str, ...]
    paper_models: tuple[str, ...]
    batches: tuple[int, ...]

    name: ClassVar[str] = "batch_sweep"
    paper: ClassVar[str] = "paper 000 Figs 6, 8, 9 (TX2: throughput, energy, memory vs batch)"
    columns: ClassVar[dict[str, str]] = {
        "device": "profile name, or `this`",
        "kind": "`emulated` (from the profile) or `measured` (real steps on this host)",
        "model": "zoo model (fedbench/conf/model/<model>.yaml)",
        "batch_size": "samples per training step",
        "status": "`ok`, or `oom` (peak over the training budget), `failed`",
        "reason": "why a row is not ok",
        "step_latency_s": "one training step (forward, backward, SGD update), s; "
        "measured: the median timed step",
        "throughput_samples_s": "batch_size / step_latency_s (paper 000's throughput)",
        "energy_j": "whole-device energy of one step, J (empty: no power sensor)",
        "energy_per_sample_j": "energy_j / batch_size, J",
        "avg_power_w": "energy_j / step_latency_s, W",
        "peak_mem_mb": "peak memory of the step, MB: emulated = sum of the mem_* terms; "
        "measured = peak RSS over the timed steps minus RSS before the model was built",
        "mem_budget_mb": "emulated: the profile's training budget; measured: MemAvailable, MB",
        "mem_weights_mb": "parameters and buffers, MB (counted on this host, as all mem_*)",
        "mem_gradients_mb": "gradients of the trainable parameters, MB",
        "mem_optimizer_mb": "optimizer state (SGD momentum buffers), MB",
        "mem_activations_mb": "activations autograd saves for backward (feature maps), MB",
        "mem_workspace_mb": "transient tensors live at the step's peak beyond the above, MB",
        "mem_input_mb": "the input batch and labels, MB",
        "gflop_per_step": "forward + backward + update, GFLOP",
        "workload_source": "`measured`, or the two measured batches it was extrapolated from",
    }

    def __post_init__(self) -> None:
        pick_models(self.models, self.paper_models, f"{self.name}.models")
        positive(self.batches, f"{self.name}.batches")

    def run(self, device: Device, out: Path) -> StudyResult:
        rows: list[Row] = []
        for model in pick_models(self.models, self.paper_models, "models"):
            for batch in sorted(set(self.batches)):
                result = device.step(StepJob(ModelRef(model), batch))
                rows.append(self.row(device, model, batch, result))
        csv = write_csv(out / f"{self.name}.csv", self.columns, rows)
        figures = (
            plot_sweep(rows, out / "batch_sweep.png"),
            plot_memory(rows, out / "memory_split.png"),
        )
        return StudyResult(self.name, device.name, csv, figures, tuple(summarise(rows)))

    def row(self, device: Device, model: str, batch: int, r: StepResult) -> Row:
        terms = memory_terms(r.workload)
        return {
            "device": device.name,
            "kind": device.kind,
            "model": model,
            "batch_size": batch,
            "status": r.status,
            "reason": r.reason,
            "step_latency_s": r.step_latency_s,
            "throughput_samples_s": ratio(batch, r.step_latency_s),
            "energy_j": r.energy_j,
            "energy_per_sample_j": ratio(r.energy_j, batch),
            "avg_power_w": r.avg_power_w,
            "peak_mem_mb": r.peak_mem_mb,
            "mem_budget_mb": r.mem_budget_mb,
            **{col: terms[term] for col, term in MEMORY_COLUMNS.items()},
            "gflop_per_step": r.workload.total_flops / 1e9,
            "workload_source": r.workload_source,
        }


def _by_model(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r["model"], []).append(r)
    return out


def _at(rows: list[Row], batch: int, key: str) -> float:
    found = [r[key] for r in rows if r["batch_size"] == batch and r["status"] == "ok"]
    return float(found[0]) if found else math.nan


def summarise(rows: list[Row]) -> list[str]:
    """Paper 000's observations 8-10: growth from batch 4 (or the smallest) to the largest."""
    lines: list[str] = []
    for model, mrows in _by_model(rows).items():
        ok = [r for r in mrows if r["status"] == "ok"]
        oom = [r["batch_size"] for r in mrows if r["status"] == "oom"]
        if len(ok) < 2:
            lines.append(f"{model}: fewer than two batches ran (oom at {oom})")
            continue
        # Paper 000 quotes growth from batch 4 to 64; from the smallest batch otherwise.
        batches = [r["batch_size"] for r in ok]
        lo, hi = (4 if 4 in batches[:-1] else batches[0]), batches[-1]
        tput = ratio(_at(ok, hi, "throughput_samples_s"), _at(ok, lo, "throughput_samples_s"))
        energy = ratio(_at(ok, hi, "energy_j"), _at(ok, lo, "energy_j"))
        acts = ratio(_at(ok, hi, "mem_activations_mb"), _at(ok, lo, "mem_activations_mb"))
        lines.append(
            f"{model}: batch {lo}->{hi} ({hi // lo}x): throughput x{fmt(tput)}, "
            f"energy/step x{fmt(energy)}, activations x{fmt(acts)}"
            + (f"; oom at batch {oom}" if oom else "")
        )
    return lines


def plot_sweep(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = (
        ("throughput_samples_s", "throughput (samples/s)"),
        ("step_latency_s", "step latency (s)"),
        ("energy_per_sample_j", "energy per sample (J)"),
        ("peak_mem_mb", "peak training tensors (MB)"),
    )
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        drawn = False
        for model, mrows in _by_model(rows).items():
            pts = [(r["batch_size"], r[key]) for r in mrows if _good(r[key])]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=model)
                drawn = True
        log2_axis(ax, sorted({r["batch_size"] for r in rows}))
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        if drawn:
            log_y(ax)
        else:
            ax.text(0.5, 0.5, "not measurable on this device", ha="center", transform=ax.transAxes)
        ax.grid(alpha=0.3, which="both")
    legend(axes.flat[0])
    title = f"batch sweep on {rows[0]['device']} ({rows[0]['kind']})"
    failed = {
        model: [r["batch_size"] for r in mrows if r["status"] != "ok"]
        for model, mrows in _by_model(rows).items()
    }
    # Why a curve stops: a run over the budget or the resident set is `oom`.
    notes = [f"{m} at {', '.join(map(str, b))}" for m, b in failed.items() if b]
    fig.suptitle(title + (f"\nnot run (oom or failed): {'; '.join(notes)}" if notes else ""))
    return save(fig, path)


def plot_memory(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    models = _by_model(rows)
    cols = min(3, len(models))
    nrows = math.ceil(len(models) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False)
    for ax, (model, mrows) in zip(axes.flat, models.items(), strict=False):
        labels = [str(r["batch_size"]) for r in mrows]
        bottom = [0.0] * len(mrows)
        for col in MEMORY_COLUMNS:
            values = [float(r[col]) for r in mrows]
            ax.bar(
                labels, values, bottom=bottom, label=col.removeprefix("mem_").removesuffix("_mb")
            )
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(model, fontsize=10)
        ax.set_xlabel("batch size")
        ax.set_ylabel("MB")
    for ax in list(axes.flat)[len(models) :]:
        ax.axis("off")
    legend(axes.flat[0], fontsize=7)
    fig.suptitle(f"memory split (paper 000 Fig 9) on {rows[0]['device']}")
    return save(fig, path)


def _good(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v) and v > 0
