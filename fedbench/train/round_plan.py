"""A round's memory plan: ask the meter for the budget, the planner for the plan.

`train.memory_planner`:
- `auto` (default): the device's budget at the round's start (the meter's
  `budget_mb`; None, e.g. the host, means no limit and the full batch)
  picks the fastest plan that fits (fedbench.train.planner, ranked by the
  meter's `time_fn`). If the meter says the budget may change mid-round
  (`budget_fn`), the loop re-plans between steps (fedbench.train.adaptive).
  If no plan fits, the job keeps the plan needing the least memory, the
  meter reports `oom`, and the reason is the planner's.
- `off`: the full batch; over budget it is `oom`.

`share` < 1 plans for that share of the budget: where the device's caps are
real (`runtime.enforce_caps`), a plan that fits the predicted budget can
still run out of the real one (the process holds more than its tensors), and
the device is planned again for less (fedbench.client.caps).

The ClientApp (real training) and the FleetView (the server's predictions)
both plan through here, so what the server predicts is what devices run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torch import nn

from fedbench.core.meter import Cost, Meter, TrainJob
from fedbench.core.plans import FULL, PlanLog
from fedbench.errors import FedbenchError, choices
from fedbench.train.adaptive import Adaptation, memoised
from fedbench.train.planner import PlanChoice, choose_plan

MODES: tuple[str, ...] = ("auto", "off")


@dataclass(frozen=True)
class RoundPlan:
    job: TrainJob  # with the chosen plan (and the log the loop fills)
    adapt: Adaptation | None  # re-planning between steps, if the budget may change
    choice: PlanChoice | None  # None: no planning (off, or no budget)
    share: float = 1.0  # of the budget the plan was chosen for

    def needed_mb(self) -> float | None:
        """What the full batch would need when the round ran a reduced plan, else None.

        What forced the reduced plan (PlanChoice.full_need_mb): the full batch's
        tensor peak over the budget, or its resident set beyond what the device
        keeps in RAM - a device far under its budget that ran micro-batches did
        so because of the latter.
        """
        if self.choice is None:
            return None
        log = self.job.plan_log
        ran = [plan for plan, _ in log.runs] if log is not None and log.runs else [self.job.plan]
        if all(plan == FULL for plan in ran):
            return None
        return self.choice.full_need_mb

    def explain(self, cost: Cost) -> Cost:
        """An `oom` because no plan fits carries the planner's reason; a reduced plan says why.

        A reduced plan also carries what the full batch would have needed
        (`extra["plan_needed_mb"]`, the RoundReport's `plan_needed_mb`).
        """
        if self.choice is None:
            return cost
        needed = self.needed_mb()
        if needed is not None:
            cost = dataclasses.replace(cost, extra={**cost.extra, "plan_needed_mb": needed})
        if cost.status == "ok" and self.share < 1.0:
            note = (
                f"planned for {self.share:.0%} of the budget: a plan for all of it ran out "
                "of memory under the device's real cap"
            )
            return dataclasses.replace(cost, reason=note)
        if self.choice.feasible or cost.status != "oom":
            return cost
        if self.job.plan_log is not None and self.job.plan_log.stopped:
            return cost  # ran out mid-round: the log's reason names the step
        return dataclasses.replace(cost, reason=f"no memory plan fits: {self.choice.reason}")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise FedbenchError(f"train.memory_planner={mode!r}: valid: {choices(MODES)}")
    return mode


def plan_round(
    model: nn.Module, job: TrainJob, meter: Meter, mode: str, share: float = 1.0
) -> RoundPlan:
    """The plan `job` starts with on `meter`'s device under `train.memory_planner=mode`."""
    check_mode(mode)
    budget = meter.budget_mb(job)
    if mode == "off" or budget is None or not job.batch_sizes:
        return RoundPlan(job, None, None)
    batch = max(job.batch_sizes)
    time_fn, holds_fn, resident_fn = meter.time_fn(), meter.holds_fn(), meter.resident_fn()
    choose = memoised(
        lambda mb: choose_plan(
            model,
            job.input_shape,
            batch,
            mb * share,
            model_name=job.model_name,
            optimizer=meter.optimizer,
            input_dtype=job.input_dtype,
            input_high=job.input_high,
            time_fn=time_fn,
            holds_fn=holds_fn,
            resident_fn=resident_fn,
        )
    )
    choice = choose(budget)
    job = dataclasses.replace(job, plan=choice.plan, plan_log=PlanLog())
    budget_fn = meter.budget_fn(model, job)
    assert job.plan_log is not None
    adapt = Adaptation(budget_fn, choose, job.plan_log) if budget_fn is not None else None
    return RoundPlan(job, adapt, choice, share)
