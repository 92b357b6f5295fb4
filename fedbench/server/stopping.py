"""Hooks that end a run early: a target reached, a budget spent (fedbench/conf/hooks).

A stopping hook returns a `Stop` from `on_round_end`; the round loop finishes
that round (its rows, its checkpoint) and ends, and summary.json says
`stopped: {round, hook, reason}` with status completed. Add one to a run:

    python -m fedbench hooks=[default,target_accuracy] hooks.target_accuracy.accuracy=0.9
    python -m fedbench hooks=[default,budget] hooks.budget.energy_j=5000

A run resumed from its folder goes on where it was stopped; the hook stops
it again at its next check.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from fedbench.errors import FedbenchError
from fedbench.server.evaluation import accuracy_of
from fedbench.server.run import LoopState, RoundOutcome, Run, ServerHook, Stop


class TargetAccuracy(ServerHook):
    """Stop at the first evaluation whose accuracy reaches `accuracy` (time to accuracy)."""

    def __init__(self, accuracy: float) -> None:
        if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)):
            raise FedbenchError(f"accuracy must be a number, got {accuracy!r}")
        if not 0.0 < accuracy <= 1.0:
            raise FedbenchError(f"accuracy={accuracy!r}: must be > 0 and <= 1 (0.9 = 90%)")
        self.accuracy = float(accuracy)

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> Stop | None:
        if outcome.evaluation is None:
            return None
        reached = accuracy_of(outcome.evaluation)
        if math.isnan(reached) or reached < self.accuracy:
            return None
        return Stop(
            f"accuracy {100 * reached:.2f}% reached the target {100 * self.accuracy:.2f}% "
            f"at virtual {state.now_s:.0f}s"
        )


class Budget(ServerHook):
    """Stop after the round in which the fleet's energy or the virtual clock reaches its budget.

    Energy is what rounds.csv sums (the devices' training and communication,
    where measured); a round is never cut short, so the last one may go over.
    """

    def __init__(self, energy_j: float | None = None, virtual_time_s: float | None = None) -> None:
        for key, value in (("energy_j", energy_j), ("virtual_time_s", virtual_time_s)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise FedbenchError(f"{key}={value!r}: must be a number > 0 or null")
        if energy_j is None and virtual_time_s is None:
            raise FedbenchError("set energy_j or virtual_time_s (e.g. hooks.budget.energy_j=5000)")
        self.energy_j = energy_j
        self.virtual_time_s = virtual_time_s
        self.spent: Callable[[], float | None] = lambda: None

    def on_run_begin(self, run: Run) -> None:
        self.spent = run.writer.energy_total  # kept by the writer, restored on resume

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> Stop | None:
        energy = self.spent()
        if self.energy_j is not None and energy is not None and energy >= self.energy_j:
            return Stop(
                f"energy {energy:.1f} J spent reached the budget {self.energy_j:g} J "
                f"in round {state.round}"
            )
        if self.virtual_time_s is not None and state.now_s >= self.virtual_time_s:
            return Stop(
                f"virtual time {state.now_s:.0f}s reached the budget {self.virtual_time_s:g}s "
                f"in round {state.round}"
            )
        return None
