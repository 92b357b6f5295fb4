"""An emulated device's memory budget over time, and which plan runs which steps.

The budget for training is the profile's `memory.train_budget_mb`, scaled
by the `memory.pressure` window in force at that hour of the day (other
apps taking memory; virtual time 0 is midnight of day 0). Within a round
the training loop asks for the budget before every optimizer step
(fedbench.train.adaptive); `RoundClock` answers at that step's virtual
time, which it knows exactly by emulating the steps already run under the
plans the loop logged - so the switch happens where the emulated timeline
says the pressure starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fedbench.core.device import DeviceState
from fedbench.core.meter import TrainJob
from fedbench.core.plans import Plan, PlanLog
from fedbench.devices.network import DAY_S
from fedbench.devices.profile import DeviceProfile

# Consecutive optimizer steps with one plan at one batch size: (plan, batch size, steps).
Run = tuple[Plan, int, int]
Advance = Callable[[list[Run], DeviceState], DeviceState]


def _inside(hour: float, start: float, end: float) -> bool:
    return start <= hour < end if start < end else (hour >= start or hour < end)


def budget_at(profile: DeviceProfile, virtual_time_s: float) -> float:
    """MB left to training at `virtual_time_s` under the profile's pressure pattern."""
    hour = (virtual_time_s % DAY_S) / 3600.0
    fractions = [f for start, end, f in profile.memory.pressure if _inside(hour, start, end)]
    return profile.memory.train_budget_mb * min(fractions, default=1.0)


def with_budget(profile: DeviceProfile, budget_mb: float) -> DeviceProfile:
    """The profile with another training budget (what the emulator checks the peak against)."""
    memory = replace(profile.memory, train_budget_mb=budget_mb)  # type: ignore[arg-type]
    return replace(profile, memory=memory)


def step_runs(job: TrainJob, first: int = 0, stop: int | None = None) -> list[Run]:
    """Steps [first, stop) of the job as runs of (plan, batch size, count), in order.

    A step's plan is the one the loop logged for it (job.plan_log), else job.plan.
    """
    log = job.plan_log
    stop = len(job.batch_sizes) if stop is None else stop
    runs: list[Run] = []
    for k in range(first, stop):
        plan = log.plan_at(k) if log is not None and k < log.steps else job.plan
        bs = job.batch_sizes[k]
        if runs and runs[-1][0] == plan and runs[-1][1] == bs:
            runs[-1] = (plan, bs, runs[-1][2] + 1)
        else:
            runs.append((plan, bs, 1))
    return runs


class RoundClock:
    """The budget before optimizer step k, at that step's emulated virtual time."""

    def __init__(
        self, profile: DeviceProfile, job: TrainJob, start: DeviceState, advance: Advance
    ) -> None:
        if job.plan_log is None:
            raise ValueError("RoundClock needs the job's plan_log (the plans the loop ran)")
        self.profile, self.job, self.advance = profile, job, advance
        self.log: PlanLog = job.plan_log
        self.state = start
        self.done = 0

    def __call__(self, step: int) -> float:
        if step > self.done:
            self.state = self.advance(step_runs(self.job, self.done, step), self.state)
            self.done = step
        return budget_at(self.profile, self.state.time_s)
