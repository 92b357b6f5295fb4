"""Re-planning within a round when the device's memory budget changes (paper 004, Sage).

Other apps take memory during the day, so the budget a round started with
may fall (or rise again) while it trains. Before every optimizer step the
training loop asks `Adaptation.plan_for`: it reads the budget for that step
(`budget_fn`, from the meter: the emulated device's pressure pattern at the
step's virtual time, or the real available memory on a physical device)
and, when it changed, asks the planner for the fastest plan within it. The
steps already done stay done, the optimizer state carries over, and the
log records which plan ran which steps so the meter costs each part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fedbench.core.plans import Plan, PlanLog
from fedbench.train.planner import PlanChoice, fmt_mb

BudgetFn = Callable[[int], float]  # optimizer step index -> MB available for training


@dataclass
class Adaptation:
    budget_fn: BudgetFn
    choose: Callable[[float], PlanChoice]  # the planner at a budget in MB
    log: PlanLog
    _budget: float | None = field(default=None, init=False)  # the budget last planned for

    def plan_for(self, step: int, current: Plan) -> Plan | None:
        """The plan for optimizer step `step`, or None if no plan fits (logged in `log.stopped`)."""
        budget = self.budget_fn(step)
        if budget == self._budget:
            return current
        self._budget = budget
        self.log.budgets_mb.append(budget)
        choice = self.choose(budget)
        if not choice.feasible:
            self.log.stopped = (
                f"memory budget fell to {fmt_mb(budget)} before step {step + 1}: {choice.reason}"
            )
            return None
        return choice.plan


def memoised(choose: Callable[[float], PlanChoice]) -> Callable[[float], PlanChoice]:
    """`choose` remembering its answer per budget (budgets are piecewise constant)."""
    answers: dict[float, PlanChoice] = {}

    def at(budget: float) -> PlanChoice:
        if budget not in answers:
            answers[budget] = choose(budget)
        return answers[budget]

    return at
