"""Workloads for the characterisation studies: measured, or extrapolated in the batch size.

A workload measurement runs one real training step on this host
(fedbench.measure.workload), so its cost grows with the batch: VGG16 at
batch 64 or paper 002's 8x512 convolution stack at batch 128 would take
many minutes on a small host. Every count a workload holds - FLOPs and
bytes per op class and pass, saved activations, the batch itself - is
affine in the batch size (each op's work is per-sample work times the
batch, plus reading its weights once), and parameters, gradients and
optimizer state do not depend on it at all. So batches above
`exact_max_batch` are extrapolated along the line through the two largest
measured batches (exact_max_batch / 2 and exact_max_batch). The one term
that is not exactly affine is the transient workspace (a peak over the
step, floored at 0); anchoring on the largest measured batches keeps its
error small (tests/characterize/test_workloads.py bounds it). The per-call
table is extrapolated call by call (the same model runs the same calls at
any batch); its categories (pass, class, kind) are kept. Each row records
which batches its workload came from.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from torch import nn

from fedbench.characterize.models import ModelRef
from fedbench.core.workload import OP_CLASSES, OpCalls, OpCost, Workload
from fedbench.errors import FedbenchError
from fedbench.measure.recorder import PHASES
from fedbench.measure.workload import measure_workload
from fedbench.models import InputSpec

# Fields that describe the step rather than count its work.
_FIXED = frozenset({"model", "input_shape", "plan", "num_params", "steps_per_update"})
# Columns of the call table that name a category, not a count.
_CATEGORIES = frozenset({"phase", "op_class", "kind", "op", "taps"})
MEASURED = "measured"
FORWARD_PHASE = PHASES.index("forward")


def extrapolate(lo: Workload, hi: Workload, batch: int) -> Workload:
    """The workload at `batch` on the line through `lo` and `hi` (same model, two batches)."""
    if lo.batch_size >= hi.batch_size:
        raise ValueError(f"anchors must grow: batch {lo.batch_size} then {hi.batch_size}")
    t = (batch - hi.batch_size) / (hi.batch_size - lo.batch_size)

    def line(a: Any, b: Any) -> Any:
        if isinstance(a, dict):
            return {k: (b[k] if k in _CATEGORIES else line(a[k], b[k])) for k in a}
        if isinstance(a, list | tuple):
            return [line(x, y) for x, y in zip(a, b, strict=True)]
        value = b + t * (b - a)
        # Counts stay counts; a transient workspace cannot go negative.
        return max(0, round(value)) if isinstance(a, int) else max(0.0, value)

    lo_d, hi_d = lo.to_dict(), hi.to_dict()
    if (lo.calls is None) != (hi.calls is None) or (
        lo.calls is not None and hi.calls is not None and lo.calls.kind != hi.calls.kind
    ):
        raise ValueError(
            f"{hi.model}: batches {lo.batch_size} and {hi.batch_size} ran different calls; "
            "their workloads cannot be extrapolated"
        )
    out = {
        k: (v if k in _FIXED else line(lo_d[k], v)) for k, v in hi_d.items() if k != "batch_size"
    }
    out["batch_size"] = batch
    return Workload.from_dict(out)


def forward_pass(w: Workload) -> Workload:
    """The forward pass of `w` alone: inference (no backward, no update, nothing saved)."""
    zero = OpCost(0.0, 0.0)
    calls = w.calls
    if calls is not None:
        keep = [i for i, p in enumerate(calls.phase) if p == FORWARD_PHASE]
        columns = {f.name: getattr(calls, f.name) for f in fields(OpCalls)}
        calls = OpCalls(
            **{k: tuple(col[i] for i in keep) if col else () for k, col in columns.items()}
        )
    return replace(
        w,
        backward={c: zero for c in OP_CLASSES},
        optimizer=zero,
        grad_bytes=0,
        optimizer_state_bytes=0,
        saved_activation_bytes=0,
        calls=calls,
    )


class WorkloadBook:
    """Workloads per (model, batch): measured up to `exact_max_batch`, extrapolated above."""

    def __init__(self, exact_max_batch: int) -> None:
        if exact_max_batch < 2:
            raise FedbenchError(
                f"exact_max_batch={exact_max_batch}: expected >= 2 (two measured batches "
                "anchor the extrapolation)"
            )
        self.exact_max_batch = exact_max_batch
        self._models: dict[ModelRef, tuple[nn.Module, InputSpec]] = {}
        self._measured: dict[tuple[ModelRef, int], Workload] = {}

    def model(self, ref: ModelRef) -> tuple[nn.Module, InputSpec]:
        if ref not in self._models:
            self._models[ref] = ref.build()
        return self._models[ref]

    def measured(self, ref: ModelRef, batch: int) -> Workload:
        key = (ref, batch)
        if key not in self._measured:
            module, spec = self.model(ref)
            self._measured[key] = measure_workload(
                module,
                spec.shape,
                batch,
                model_name=ref.label,
                input_dtype=spec.dtype,
                input_high=spec.high,
            )
        return self._measured[key]

    def get(self, ref: ModelRef, batch: int) -> tuple[Workload, str]:
        """The workload and where it came from ("measured" or "extrapolated from a,b")."""
        if batch <= self.exact_max_batch:
            return self.measured(ref, batch), MEASURED
        lo, hi = self.exact_max_batch // 2, self.exact_max_batch
        w = extrapolate(self.measured(ref, lo), self.measured(ref, hi), batch)
        return w, f"extrapolated from batch {lo},{hi}"
