"""fedbench's own ServerApp on the FleetGrid: its FleetStrategy's `start()`, as a Flower app's.

A Flower app's `main` calls its strategy's `start(grid, initial_arrays,
num_rounds, train_config, evaluate_fn)`; fedbench's own app does the same
with the FleetStrategy-wrapped strategy (`algorithm=`), on the FleetGrid
every app runs on (fedbench.server.fleet_grid), so there is one round loop
(fedbench.server.app_loop) for fedbench's own runs and a user's. `start()`
is Flower's own, unpatched; the couplings it rests on are pinned by
tests/server/test_flower_couplings.py.

What is fedbench's own here:

- the train config is the train group's hyperparameters (fedbench.server.apps);
- `evaluate_fn` scores the global model on the server's test split after the
  schedule's evaluation rounds only (a day's last round), and hands the
  scores to the loop as it makes them; before round 1 (start()'s round 0)
  it scores nothing: the server assembly scored the initial model before
  the hooks began, and a resumed run does not score it again;
- a resumed run's `start()` runs the schedule's remaining rounds from the
  checkpoint's model; the FleetStrategy tells the wrapped strategy the
  schedule's round numbers (`first_round`, which the loop sets).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord

from fedbench.server.evaluation import Evaluator
from fedbench.server.fleet_grid import EVALUATING, FleetGrid, GridStop, Logged, reraise
from fedbench.server.fleet_strategy import FleetStrategy

CENTRAL = "central"  # the kind of metrics the loop reads an app's server evaluation as


@dataclass
class OwnServerApp:
    """fedbench's own app (no `app=`): FleetStrategy.start on the FleetGrid."""

    fleet: FleetStrategy
    evaluator: Evaluator
    train_config: ConfigRecord
    timeout_s: float  # host seconds start() waits for a round's replies
    name = "fedbench"
    own = True

    def run(self, grid: FleetGrid, initial: ArrayRecord, rounds: int, logged: Logged) -> None:
        """The schedule's `rounds` rounds from `initial`; what stopped the grid, re-raised."""

        def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
            return self.evaluate(server_round, arrays, logged)

        with contextlib.suppress(GridStop):  # fedbench stopped it: the grid says why
            self.fleet.start(
                grid=grid,
                initial_arrays=initial,
                num_rounds=rounds,
                timeout=self.timeout_s,
                train_config=self.train_config,
                evaluate_fn=evaluate,
            )
        reraise(grid)

    def evaluate(
        self, server_round: int, arrays: ArrayRecord, logged: Logged
    ) -> MetricRecord | None:
        """The global model on the test split after an evaluation round (None otherwise)."""
        start = self.fleet.round_start
        if server_round == 0 or start is None:
            return None
        logged(EVALUATING, {})  # start() calls this after the round's aggregate
        if not start.spec.evaluate:
            return None
        scores = self.evaluator(start.spec.round, arrays)
        logged(CENTRAL, scores)
        return MetricRecord(dict(scores))
