"""The memory planner: the fastest plan whose measured peak fits a memory budget (paper 004, Sage).

Sage trains within any device's memory by mixing gradient checkpointing
and micro-batching and adapting the mix to the memory available at run
time. Here every candidate plan (micro-batch count m dividing the batch x
checkpoint segment count s of the model's sequential trunk) is judged by
its *measured* workload (fedbench.measure.workload, cached): its peak (the
emulator's memory terms) against the budget - and, given `holds_fn`,
whether the device keeps the process's whole resident set in RAM (an
emulated MNN phone holds far more than the tensors) - and its time per optimizer
step from `time_fn` (the emulated device's latency, recompute included)
or, without a device, a roofline proxy over the measured FLOPs and bytes.

The search measures as little as it can, in order of expected speed:

1. the full batch; if it fits, it is the plan (nothing else is measured);
2. weights + gradients + optimizer state (+ the batch) are in every plan:
   if they alone exceed the budget, no plan fits, and the reason says so;
3. per segment count s (0 first, then sqrt(units) and the others), the
   smallest fitting m. Activations and workspace shrink at most as 1/m, so
   `floor + (peak(m=1) - floor) / m` is a lower bound of peak(m): the first
   m it does not rule out is measured, then larger m until one fits. A plan
   with more recompute and no fewer micro-batches than one already found
   cannot be faster, so later s only try fewer micro-batches;
4. among the fitting plans found, the fastest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fedbench.core.plans import FULL, Plan
from fedbench.core.workload import OP_CLASSES, Workload
from fedbench.measure.checkpointing import trunk
from fedbench.measure.workload import measure_workload

MB = float(1 << 20)
TimeFn = Callable[[Workload], float]
HoldsFn = Callable[[Workload], bool]  # whether the device keeps the step's resident set in RAM
ResidentFn = Callable[[Workload], float]  # the step's process resident set on the device, MB

# The proxy's nominal device: a mid-range phone CPU (relative cost only).
_PROXY_GFLOPS = 20.0
_PROXY_GBS = 5.0
_PROXY_PASS_S = 2e-3  # fixed cost of one forward/backward pass (launches, Python)


def proxy_time_s(w: Workload) -> float:
    """Relative step time of a workload: a roofline per op class on a nominal CPU."""
    total = 0.0
    for phase in (w.forward, w.backward):
        for cls in OP_CLASSES:
            cost = phase.get(cls)
            if cost is not None:
                total += max(cost.flops / 1e9 / _PROXY_GFLOPS, cost.bytes / 1e9 / _PROXY_GBS)
    total += max(w.optimizer.flops / 1e9 / _PROXY_GFLOPS, w.optimizer.bytes / 1e9 / _PROXY_GBS)
    return total + _PROXY_PASS_S * max(1, w.steps_per_update)


@dataclass(frozen=True)
class PlanEstimate:
    """One measured candidate."""

    plan: Plan
    peak_mb: float
    time_s: float
    fits: bool
    resident_mb: float = math.nan  # the process's resident set (NaN: no resident_fn)


@dataclass(frozen=True)
class PlanChoice:
    plan: Plan  # the choice; if infeasible, the candidate that needed the least memory
    batch_size: int
    budget_mb: float
    predicted_peak_mb: float
    predicted_time_s: float  # per optimizer step: device seconds, or proxy (time_source)
    feasible: bool
    reason: str
    time_source: str  # "device" (time_fn) or "proxy" (proxy_time_s)
    tried: tuple[PlanEstimate, ...]  # every candidate measured, in order

    @property
    def label(self) -> str:
        return self.plan.name(self.batch_size)

    @property
    def full_need_mb(self) -> float | None:
        """What ruled the full batch out, MB; None if it was not measured (the grid always is).

        Its training-tensor peak when that exceeds the budget; else, when the
        device could not keep the process resident, its resident set.
        """
        full = next((e for e in self.tried if e.plan == FULL), None)
        if full is None:
            return None
        if full.peak_mb <= self.budget_mb and not full.fits and not math.isnan(full.resident_mb):
            return full.resident_mb
        return full.peak_mb


def fmt_mb(x: float) -> str:
    """MB for messages: one decimal from 10 MB, else 3 significant digits."""
    return f"{x:.1f} MB" if x >= 10 else f"{x:.3g} MB"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def segment_counts(model: nn.Module) -> list[int]:
    """Checkpoint segment candidates: 0, then sqrt(units) first, then 2, 4, 8."""
    units = sum(len(c) for _, c in trunk(model))
    if units < 2:
        return [0]
    root = math.sqrt(units)
    found = {s for s in (2, 4, 8, max(2, round(root))) if s <= units}
    return [0, *sorted(found, key=lambda s: (abs(s - root), s))]


class _Search:
    def __init__(
        self,
        model: nn.Module,
        input_shape: tuple[int, ...],
        batch_size: int,
        budget_mb: float,
        model_name: str,
        optimizer: str,
        input_dtype: torch.dtype,
        input_high: int | None,
        time_fn: TimeFn | None,
        holds_fn: HoldsFn | None = None,
        resident_fn: ResidentFn | None = None,
    ) -> None:
        self.model, self.shape, self.bs, self.budget = model, input_shape, batch_size, budget_mb
        self.model_name, self.optimizer = model_name, optimizer
        self.input_dtype, self.input_high = input_dtype, input_high
        self.time_fn, self.holds_fn, self.resident_fn = time_fn, holds_fn, resident_fn
        self.tried: dict[Plan, PlanEstimate] = {}

    def workload(self, plan: Plan) -> Workload:
        return measure_workload(
            self.model,
            self.shape,
            self.bs,
            model_name=self.model_name,
            optimizer=self.optimizer,
            plan=plan.name(self.bs),
            checkpoint_segments=plan.checkpoint_segments,
            microbatches=plan.microbatches,
            input_dtype=self.input_dtype,
            input_high=self.input_high,
        )

    def estimate(self, plan: Plan) -> PlanEstimate:
        if plan not in self.tried:
            w = self.workload(plan)
            peak = w.peak_bytes / MB
            fits = peak <= self.budget and (self.holds_fn is None or self.holds_fn(w))
            seconds = (self.time_fn or proxy_time_s)(w) if fits else math.nan
            resident = self.resident_fn(w) if self.resident_fn is not None else math.nan
            self.tried[plan] = PlanEstimate(plan, peak, seconds, fits, resident)
        return self.tried[plan]

    def choice(self, plan: Plan, feasible: bool, reason: str) -> PlanChoice:
        e = self.estimate(plan)
        return PlanChoice(
            plan=plan,
            batch_size=self.bs,
            budget_mb=self.budget,
            predicted_peak_mb=e.peak_mb,
            predicted_time_s=e.time_s,
            feasible=feasible,
            reason=reason,
            time_source="proxy" if self.time_fn is None else "device",
            tried=tuple(self.tried.values()),
        )

    def fastest(self, found: list[Plan]) -> PlanChoice:
        best = min(
            found, key=lambda p: (self.tried[p].time_s, p.microbatches, p.checkpoint_segments)
        )
        e = self.tried[best]
        return self.choice(
            best,
            True,
            f"{best.name(self.bs)} fits: {fmt_mb(e.peak_mb)} <= {fmt_mb(self.budget)}",
        )

    def smallest(self) -> Plan:
        return min(self.tried, key=lambda p: self.tried[p].peak_mb)

    def grid(self) -> PlanChoice:
        full = self.estimate(FULL)
        if full.fits:
            return self.choice(FULL, True, f"the full batch fits: {fmt_mb(full.peak_mb)}")
        w = self.workload(FULL)
        state_mb = (w.param_bytes + w.grad_bytes + w.optimizer_state_bytes) / MB
        floor_mb = state_mb + w.input_bytes / MB
        if state_mb > self.budget:
            return self.choice(
                FULL,
                False,
                f"weights + gradients + optimizer state alone ({fmt_mb(state_mb)}) exceed "
                f"the budget ({fmt_mb(self.budget)})",
            )
        if floor_mb > self.budget:
            return self.choice(
                FULL,
                False,
                f"weights + gradients + optimizer state ({fmt_mb(state_mb)}) and the batch "
                f"of {self.bs} inputs ({fmt_mb(floor_mb - state_mb)}) exceed the budget "
                f"({fmt_mb(self.budget)})",
            )
        found: list[Plan] = []
        bound = self.bs + 1
        segments = segment_counts(self.model)
        for s in segments:
            allowed = [m for m in divisors(self.bs) if m < bound]
            if not allowed:
                continue
            one = self.estimate(Plan(1, s)).peak_mb
            m_fit = self._smallest_m(s, allowed, floor_mb, one)
            if m_fit is not None:
                found.append(Plan(m_fit, s))
                bound = min(bound, m_fit)
        if found:
            return self.fastest(found)
        # Nothing fits: measure the plan that needs the least memory, to say by how much.
        best_s = min(segments, key=lambda s: self.tried[Plan(1, s)].peak_mb)
        least = self.estimate(Plan(self.bs, best_s))
        how = f"with {best_s} checkpoint segments " if best_s else ""
        no_ckpt = "" if len(segments) > 1 else " (the model has no sequential trunk to checkpoint)"
        if least.peak_mb <= self.budget:
            return self.choice(
                self.smallest(),
                False,
                f"even 1-sample micro-batches {how}need a resident set beyond the "
                f"device's RAM, although their tensors fit "
                f"({fmt_mb(least.peak_mb)} <= {fmt_mb(self.budget)})",
            )
        return self.choice(
            self.smallest(),
            False,
            f"even 1-sample micro-batches {how}need {fmt_mb(least.peak_mb)} > "
            f"{fmt_mb(self.budget)}{no_ckpt}",
        )

    def _smallest_m(self, s: int, allowed: list[int], floor_mb: float, one_mb: float) -> int | None:
        if self.estimate(Plan(1, s)).fits:
            return 1
        possible = [m for m in allowed if floor_mb + (one_mb - floor_mb) / m <= self.budget]
        for m in possible:
            if self.estimate(Plan(m, s)).fits:
                return m
        return None

    def listed(self, candidates: Sequence[Plan]) -> PlanChoice:
        for plan in candidates:
            plan.check(self.bs)
        found: list[Plan] = []
        for plan in sorted(set(candidates), key=_expected_speed):
            if any(f.microbatches <= plan.microbatches for f in found if _more_recompute(plan, f)):
                continue  # slower than a fitting plan already found
            if self.estimate(plan).fits:
                found.append(plan)
        if found:
            return self.fastest(found)
        least = self.smallest()
        return self.choice(
            least,
            False,
            f"none of the {len(set(candidates))} candidate plans fits: the smallest, "
            f"{least.name(self.bs)}, needs {fmt_mb(self.tried[least].peak_mb)} > "
            f"{fmt_mb(self.budget)}",
        )


def _expected_speed(plan: Plan) -> tuple[bool, int, int]:
    return plan.checkpoint_segments > 0, plan.microbatches, plan.checkpoint_segments


def _more_recompute(plan: Plan, other: Plan) -> bool:
    # Any checkpointing recomputes (about) one forward of the trunk.
    return plan.checkpoint_segments > 0 or other.checkpoint_segments == 0


def choose_plan(
    model: nn.Module,
    input_shape: tuple[int, ...],
    batch_size: int,
    budget_mb: float,
    *,
    model_name: str,
    optimizer: str = "sgd_momentum",
    candidates: Sequence[Plan] | None = None,
    input_dtype: torch.dtype = torch.float32,
    input_high: int | None = None,
    time_fn: TimeFn | None = None,
    holds_fn: HoldsFn | None = None,
    resident_fn: ResidentFn | None = None,
) -> PlanChoice:
    """The fastest plan for one optimizer step of `batch_size` within `budget_mb`.

    `candidates` restricts the search to those plans (all measured, fastest
    fitting wins); by default the grid of the module docstring. `time_fn`
    gives a measured workload's step time on the device (e.g. the emulator's
    latency for its profile); without it, `proxy_time_s`. `holds_fn` says
    whether the device keeps a workload's resident set in RAM; a plan it
    refuses does not fit whatever its tensors. `resident_fn` (the device's
    resident set of a workload, MB) is recorded per candidate, to say what a
    refused full batch would have needed (`PlanChoice.full_need_mb`).
    """
    search = _Search(
        model,
        tuple(input_shape),
        batch_size,
        float(budget_mb),
        model_name,
        optimizer,
        input_dtype,
        input_high,
        time_fn,
        holds_fn,
        resident_fn,
    )
    return search.grid() if candidates is None else search.listed(candidates)
