"""Memory plans: how one optimizer step is split to fit a device's memory (paper 004, Sage).

A plan has two knobs, both exact rewrites of the same step:

- `microbatches` m: the batch runs as m equal slices with gradient
  accumulation, so only one slice's activations are alive at a time;
- `checkpoint_segments` s: the model's sequential trunk runs as s
  checkpointed segments (fedbench.measure.checkpointing): the forward keeps
  only each segment's input, and the backward recomputes the segment.

Labels name a plan at a batch size, as records and the bench spell it:
"bs32" (the full batch), "4x8" (4 micro-batches of 8), "bs32+ckpt4",
"4x8+ckpt4". "full" is the full batch at any size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from fedbench.errors import FedbenchError

_LABEL = re.compile(r"^(?:bs(?P<bs>\d+)|(?P<m>\d+)x(?P<size>\d+)|full)(?:\+ckpt(?P<s>\d+))?$")
LABEL_FORMS = "full, bs<B>, <M>x<B/M>, each optionally +ckpt<S> (e.g. bs32, 4x8, 4x8+ckpt4)"


@dataclass(frozen=True)
class Plan:
    microbatches: int = 1
    checkpoint_segments: int = 0

    def check(self, batch_size: int) -> None:
        """Refuse a plan that cannot run at `batch_size`."""
        if self.microbatches < 1 or batch_size % self.microbatches:
            raise FedbenchError(
                f"plan {self.microbatches} micro-batches: must be >= 1 and divide the "
                f"batch size {batch_size}"
            )
        if self.checkpoint_segments < 0:
            raise FedbenchError(
                f"plan checkpoint segments {self.checkpoint_segments}: must be >= 0"
            )

    def name(self, batch_size: int) -> str:
        """The label at `batch_size`, e.g. "bs32", "4x8+ckpt4"."""
        m = self.microbatches
        core = f"bs{batch_size}" if m == 1 else f"{m}x{batch_size // m}"
        return core + (f"+ckpt{self.checkpoint_segments}" if self.checkpoint_segments else "")

    def microbatches_for(self, batch_size: int, step_size: int) -> int:
        """Micro-batches of a step of `step_size` examples under this plan made for `batch_size`.

        The epoch's last step may be short. It runs as the fewest equal
        slices that are no larger than the plan's micro-batch, so it never
        needs more memory than a full step (equal slices: the accumulated
        gradient stays exact, and the measured workload has the same shape).
        """
        cap = max(1, batch_size // self.microbatches)
        for m in range(max(1, math.ceil(step_size / cap)), step_size + 1):
            if step_size % m == 0:
                return m
        return 1  # step_size 0 has no slices; callers never step on nothing


FULL = Plan()


def parse_plan(text: str, batch_size: int) -> Plan:
    """The plan a label names, checked against `batch_size` (see LABEL_FORMS)."""
    found = _LABEL.match(text.strip())
    if found is None:
        raise FedbenchError(f"plan={text!r}: not a plan label; valid forms: {LABEL_FORMS}")
    segments = int(found["s"] or 0)
    if found["bs"] is not None:
        if int(found["bs"]) != batch_size:
            raise FedbenchError(f"plan={text!r}: names batch {found['bs']}, not {batch_size}")
        plan = Plan(1, segments)
    elif found["m"] is not None:
        m, size = int(found["m"]), int(found["size"])
        if m < 1 or m * size != batch_size:
            raise FedbenchError(
                f"plan={text!r}: {m} micro-batches of {size} is not the batch size {batch_size}"
            )
        plan = Plan(m, segments)
    else:
        plan = Plan(1, segments)
    plan.check(batch_size)
    return plan


@dataclass
class PlanLog:
    """The plans a round actually ran, as runs of consecutive optimizer steps.

    Mutable on purpose: the training loop appends as it steps, and the
    meter reads it (while training, to know the device's virtual clock; after
    it, to cost each plan's steps). `stopped` says why training ended early
    (the budget fell below what any plan needs), else "". `budgets_mb` are
    the distinct budgets the round planned for, in order.
    """

    runs: list[tuple[Plan, int]] = field(default_factory=list)
    stopped: str = ""
    budgets_mb: list[float] = field(default_factory=list)

    def record(self, plan: Plan) -> None:
        if self.runs and self.runs[-1][0] == plan:
            self.runs[-1] = (plan, self.runs[-1][1] + 1)
        else:
            self.runs.append((plan, 1))

    @property
    def steps(self) -> int:
        return sum(n for _, n in self.runs)

    def plan_at(self, step: int) -> Plan:
        done = 0
        for plan, n in self.runs:
            done += n
            if step < done:
                return plan
        raise IndexError(f"step {step} not run yet ({done} steps logged)")

    def label(self, batch_size: int) -> str:
        """The plans in the order they ran, e.g. "bs32>4x8+ckpt4" ("" before any step)."""
        return ">".join(plan.name(batch_size) for plan, _ in self.runs)
