"""Per-operator correlation of one training step with sampled utilisation and power.

Paper 000's tool: record the start and end of every operation of a training
step, sample utilisation and power every 10 ms alongside, and afterwards
join the two on time. Here torch.profiler (CPU activities, shapes) records
the ops of one steady-state step (fedbench.measure.step, after warm-up
steps) while a `Probe` samples the device.

Joining. Profiler times are mapped onto the probe's clock
(time.perf_counter) through a record_function marker around the step whose
start is taken against perf_counter just before it. An op's energy is the
integral of the device's sampled power over the op's interval, power being
piecewise linear between samples, so an op shorter than one sample period
gets the interpolated power times its duration. Its utilisation is the
time-weighted mean of the per-interval CPU utilisation it overlaps (10 ms
tick deltas: coarse for single ops, meaningful per class).

Ops. Only outermost aten ops count (an aten::linear, not the aten::addmm
inside it), so no time is counted twice on a thread. The step's time not
covered by any aten op (Python, the autograd engine, optimizer
book-keeping) is the "untracked" row, so class shares sum to one.

Phases. The step runner announces forward / backward / optimizer; each
phase becomes a record_function range and an op belongs to the phase its
start falls in (ops after the first backward op are backward).

Classes (name rules on the aten op name, first match wins):

| class       | ops                                                              |
|-------------|------------------------------------------------------------------|
| dense       | conv*/convolution*(+backward) unless depthwise, linear, mm,      |
|             | addmm, bmm, baddbmm, matmul, einsum, attention, RNN cells        |
| depthwise   | convolutions whose weight has one input channel per group and    |
|             | more than one input channel (groups == in_channels), from shapes |
| movement    | cat, stack, copy_, clone, contiguous, to/_to_copy, index*,       |
|             | gather, scatter*, *pad*, repeat, roll, flip, fills and zeros,    |
|             | embedding, slice/select backward, im2col/col2im                  |
| other       | views and metadata (view, reshape, t, transpose, permute,        |
|             | expand, squeeze, detach, ...), allocation (empty*), .item(),     |
|             | and any name no rule matches                                     |
| elementwise | arithmetic, activations, normalisation, pooling, softmax,        |
|             | losses, reductions, dropout, upsampling, _foreach_* updates      |
"""

from __future__ import annotations

import csv
import math
import re
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from fedbench.measure.probe import Probe, ProbeTrace
from fedbench.measure.probe.series import integrate, interval_mean, merge
from fedbench.measure.step import StepObserver, StepSpec, prepare, run_step

OP_TABLE_CLASSES: tuple[str, ...] = (
    "dense", "depthwise", "elementwise", "movement", "other", "untracked",
)  # fmt: skip
PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")
STEP_MARK = "fedbench::profiled_step"
PHASE_MARK = "fedbench::phase::"

_DENSE = re.compile(
    r"(_?conv\w*|mkldnn_convolution\w*|cudnn_convolution\w*|linear|linear_backward"
    r"|mkldnn_linear\w*|addmm|mm|bmm|baddbmm|addbmm|matmul|einsum|\w*scaled_dot_product\w*"
    r"|lstm\w*|gru\w*|rnn_\w*|mkldnn_rnn\w*)"
)
_MOVEMENT = re.compile(
    r"(cat|stack|hstack|vstack|copy_?|clone|contiguous|to|_to_copy|_copy_from\w*|index\w*"
    r"|_index_put_impl_|_unsafe_index\w*|gather|scatter\w*|\w*_scatter|\w*pad\w*|repeat\w*"
    r"|roll|flip|zeros\w*|ones\w*|full\w*|new_zeros|new_ones|new_full|fill_?|zero_"
    r"|embedding\w*|slice_backward|select_backward|unfold\w*|im2col|col2im"
    r"|pixel_(un)?shuffle|channel_shuffle|narrow_copy|masked_scatter\w*|_foreach_zero_?)"
)
_OTHER = re.compile(
    r"(view\w*|_unsafe_view|_reshape_alias|reshape|flatten|unflatten|t|transpose_?|permute"
    r"|expand\w*|squeeze_?|unsqueeze_?|as_strided_?|slice|select|narrow|split\w*|chunk"
    r"|unbind|unsafe_split\w*|unsafe_chunk|detach_?|alias|lift_fresh\w*|empty\w*"
    r"|new_empty\w*|item|_local_scalar_dense|resize_?|set_|size|stride|numel|is_\w+"
    r"|result_type|record_stream)"
)
_ELEMENTWISE = re.compile(
    r"(_foreach_\w+|add\w*|sub\w*|rsub|mul\w*|div\w*|neg_?|pow\w*|sqrt_?|rsqrt_?|exp\w*"
    r"|log\w*|_log\w*|abs_?|clamp\w*|minimum|maximum|max\w*|min\w*|where|lerp_?|sign_?"
    r"|reciprocal_?|sum|mean|var\w*|std\w*|norm\w*|prod|cumsum|amax|amin|argmax|argmin"
    r"|relu\w*|threshold\w*|hardtanh\w*|leaky_relu\w*|elu\w*|gelu\w*|silu\w*|mish\w*"
    r"|hardswish\w*|hardsigmoid\w*|sigmoid\w*|tanh\w*|softplus\w*|_?softmax\w*"
    r"|_?log_softmax\w*|\w*dropout\w*|\w*batch_norm\w*|\w*layer_norm\w*|\w*group_norm\w*"
    r"|instance_norm|\w*pool\w*|adaptive_\w+|upsample\w*|\w*cross_entropy\w*|nll_loss\w*"
    r"|mse_loss\w*|l1_loss\w*|smooth_l1_loss\w*|huber_loss\w*|kl_div\w*|eq|ne|lt|le|gt|ge"
    r"|bitwise_\w+|logical_\w+|erf\w*|cos|sin|square)"
)
# Ordered (class, rule) table: depthwise is decided from shapes after a dense match.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("dense", _DENSE),
    ("movement", _MOVEMENT),
    ("other", _OTHER),
    ("elementwise", _ELEMENTWISE),
)


def _is_depthwise(name: str, shapes: Sequence[Sequence[int]]) -> bool:
    # convolution_backward(grad_out, input, weight, ...), the forward ops (input, weight, ...)
    first = 1 if "backward" in name else 0
    if "conv" not in name or len(shapes) < first + 2:
        return False
    x, w = shapes[first], shapes[first + 1]
    if len(x) < 3 or len(w) < 3:
        return False
    return w[1] == 1 and x[1] > 1 and w[0] % x[1] == 0


def classify_op(name: str, input_shapes: Sequence[Sequence[int]] = ()) -> str:
    """The class of one aten op (module table); `name` with or without "aten::"."""
    base = name.removeprefix("aten::")
    for op_class, rule in _RULES:
        if rule.fullmatch(base):
            if op_class == "dense" and _is_depthwise(base, input_shapes):
                return "depthwise"
            return op_class
    return "other"


@dataclass(frozen=True)
class OpInterval:
    """One executed op on the probe's clock (perf_counter seconds)."""

    name: str
    op_class: str
    phase: str  # one of PHASES, or "" outside every phase
    start: float
    end: float


@dataclass(frozen=True)
class OpRow:
    """One row of the operator table: an op class or an op name."""

    level: str  # "class" or "op"
    name: str  # the class, or the aten op name
    op_class: str
    count: int  # calls; for "untracked", the gaps between ops
    time_s: float
    share: float  # of the profiled step's wall time
    forward_s: float
    backward_s: float
    optimizer_s: float
    energy_j: float  # NaN without a power source
    cpu_util: float  # time-weighted mean CPU utilisation during these ops


class _PhaseRanges(StepObserver):
    """Turns the step runner's phase announcements into profiler ranges."""

    def __init__(self) -> None:
        self._open: AbstractContextManager[Any] | None = None

    def phase(self, name: str | None) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None
        if name is not None:
            self._open = record_function(PHASE_MARK + name)
            self._open.__enter__()


def _outermost_aten(event: Any) -> bool:
    if not event.name.startswith("aten::"):
        return False
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True


@dataclass(frozen=True)
class ProfiledStep:
    """The ops and phases of one profiled step on the probe clock."""

    ops: tuple[OpInterval, ...]
    phases: tuple[tuple[str, float, float], ...]  # (phase, start, end)
    start: float
    end: float


def extract_ops(events: Iterable[Any], step_start: float) -> ProfiledStep:
    """Outermost aten ops and phase ranges of the profiled step on the probe clock.

    `step_start` is perf_counter taken just before entering the STEP_MARK range.
    """
    events = list(events)
    step = next(e for e in events if e.name == STEP_MARK)
    offset = step_start - step.time_range.start * 1e-6

    def span(e: Any) -> tuple[float, float]:
        return (offset + e.time_range.start * 1e-6, offset + e.time_range.end * 1e-6)

    phases = tuple(
        (e.name.removeprefix(PHASE_MARK), *span(e)) for e in events if e.name.startswith(PHASE_MARK)
    )
    t0, t1 = span(step)
    ops: list[OpInterval] = []
    for e in events:
        if not _outermost_aten(e):
            continue
        a, b = span(e)
        if not t0 <= a <= t1:  # profiler set-up and tear-down are not the step
            continue
        phase = next((p for p, p0, p1 in phases if p0 <= a <= p1), "")
        ops.append(OpInterval(e.name, classify_op(e.name, e.input_shapes or ()), phase, a, b))
    return ProfiledStep(tuple(ops), phases, t0, t1)


def _row(
    level: str,
    name: str,
    op_class: str,
    spans: list[tuple[float, float, str]],
    step_s: float,
    trace: ProbeTrace,
) -> OpRow:
    t_power, power = trace.power_series()
    t_util, util = trace.cpu_util_series()
    has_power = bool(np.isfinite(power).any())
    time_s = sum((b - a for a, b, _ in spans), 0.0)
    by_phase = {p: sum((b - a for a, b, q in spans if q == p), 0.0) for p in PHASES}
    energy = sum(integrate(t_power, power, a, b) for a, b, _ in spans) if has_power else math.nan
    weighted = [(b - a, interval_mean(t_util, util, a, b)) for a, b, _ in spans]
    weighted = [(w, u) for w, u in weighted if not math.isnan(u) and w > 0]
    cpu = sum(w * u for w, u in weighted) / sum(w for w, _ in weighted) if weighted else math.nan
    return OpRow(
        level, name, op_class, len(spans), time_s, time_s / step_s if step_s > 0 else math.nan,
        by_phase["forward"], by_phase["backward"], by_phase["optimizer"], energy, cpu,
    )  # fmt: skip


def _gaps(
    ops: Sequence[OpInterval], t0: float, t1: float, phases: Sequence[tuple[str, float, float]]
) -> list[tuple[float, float, str]]:
    covered = merge(
        [(max(o.start, t0), min(o.end, t1)) for o in ops if o.end > t0 and o.start < t1]
    )
    gaps, cursor = [], t0
    for a, b in [*covered, (t1, t1)]:
        if a > cursor:
            gaps.append((cursor, a))
        cursor = max(cursor, b)
    # Split each gap at phase boundaries so untracked time is attributed too.
    out: list[tuple[float, float, str]] = []
    for a, b in gaps:
        cuts = sorted({a, b, *(x for _, p0, p1 in phases for x in (p0, p1) if a < x < b)})
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            mid = 0.5 * (lo + hi)
            out.append((lo, hi, next((p for p, p0, p1 in phases if p0 <= mid <= p1), "")))
    return out


def op_table(step: ProfiledStep, trace: ProbeTrace) -> list[OpRow]:
    """Rows per op class (incl. "untracked") then per op name, longest first."""
    ops, t0, t1 = step.ops, step.start, step.end
    step_s = t1 - t0
    rows: list[OpRow] = []
    for op_class in OP_TABLE_CLASSES[:-1]:
        spans = [(o.start, o.end, o.phase) for o in ops if o.op_class == op_class]
        if spans:
            rows.append(_row("class", op_class, op_class, spans, step_s, trace))
    rows.append(
        _row("class", "untracked", "untracked", _gaps(ops, t0, t1, step.phases), step_s, trace)
    )
    # A name can fall in two classes (conv2d: dense or depthwise): one row each.
    keys = sorted({(o.name, o.op_class) for o in ops})
    by_name = [
        _row("op", name, op_class,
             [(o.start, o.end, o.phase) for o in ops if (o.name, o.op_class) == (name, op_class)],
             step_s, trace)
        for name, op_class in keys
    ]  # fmt: skip
    return rows + sorted(by_name, key=lambda r: -r.time_s)


def profile_step(
    model: nn.Module,
    input_shape: tuple[int, ...],
    batch_size: int,
    probe_interval_s: float = 0.01,
    warmup_steps: int = 2,
) -> list[OpRow]:
    """Profile one steady-state training step of a copy of `model` (module doc)."""
    step = prepare(model, StepSpec(tuple(input_shape), batch_size))
    for _ in range(warmup_steps):
        run_step(step, StepObserver())
    observer = _PhaseRanges()
    with (
        Probe(probe_interval_s) as trace,
        profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof,
    ):
        step_start = time.perf_counter()
        with record_function(STEP_MARK):
            run_step(step, observer)
    profiled = extract_ops(prof.events(), step_start)
    return op_table(profiled, trace)


def write_op_table(rows: Iterable[OpRow], path_csv: str | Path) -> None:
    """The table as CSV, one row per OpRow; NaN as an empty cell."""
    path = Path(path_csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([fl.name for fl in fields(OpRow)])
        for row in rows:
            writer.writerow(
                ["" if isinstance(v, float) and math.isnan(v) else v for v in astuple(row)]
            )
