"""A run as its hooks see it: the loop's state, a round's outcome, the run, the hook interface.

The round loop (fedbench.server.loop) and every hook (fedbench.server.hooks)
share these types; they sit below both so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from flwr.app import ArrayRecord, MetricRecord
from flwr.serverapp.strategy import Strategy

from fedbench.core.records import ClientMetric, RoundReport
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.report.progress import Task
from fedbench.report.server_rounds import ServerRoundsWriter
from fedbench.report.writer import RunWriter
from fedbench.scenarios.base import RoundSpec
from fedbench.server.checkpoint import Checkpoint
from fedbench.server.close.base import Closing
from fedbench.server.replies import Reply
from strategies.base import SelectionStrategy


@dataclass
class LoopState:
    """Where the run is: what a checkpoint saves and a resume restores."""

    round: int  # the last complete round (0: none yet)
    now_s: float  # the virtual clock
    model_version: int  # aggregations applied to the global model
    arrays: ArrayRecord  # the global model


@dataclass(frozen=True)
class RoundOutcome:
    spec: RoundSpec
    start_s: float  # virtual time the round started
    closing: Closing
    replies: list[Reply]  # one per device the round sent a message to, in device order
    picked: int  # devices the selector picked
    aggregated: int  # updates the wrapped strategy aggregated
    model_version: int  # the global model's version after the round
    train_metrics: MetricRecord | None
    evaluation: dict[str, float] | None  # on evaluation rounds
    host_round_s: float  # host seconds from configure to aggregate
    server_s: float  # of those, the server's own work (not waiting for replies)
    skipped: str  # why nobody trained, if nobody did
    # What the devices' evaluate replies returned (a user app's federated evaluation).
    evaluate_metrics: tuple[ClientMetric, ...] = ()

    @property
    def reports(self) -> list[RoundReport]:
        return [r.report for r in self.replies]

    @property
    def client_metrics(self) -> list[ClientMetric]:
        """Every number the devices returned this round: train replies, then evaluate ones."""
        train = [
            ClientMetric(r.report.round, r.report.day, r.device.name, "train", *metric)
            for r in self.replies
            for metric in r.metrics
        ]
        return train + list(self.evaluate_metrics)

    @property
    def end_s(self) -> float:
        return self.start_s + self.closing.duration_s


@dataclass(frozen=True)
class Stop:
    """A hook's answer at a round's end: end the run after this round, and why."""

    reason: str


@dataclass(frozen=True)
class Stopped:
    """The run ended early: after which round, by which hook, why (summary.json `stopped`)."""

    round: int
    hook: str
    reason: str


@dataclass
class Availability:
    """How many devices could be picked at the last round's start (the AvailabilityHook's)."""

    available: int = -1  # -1: not counted
    low_battery: int = 0


@dataclass
class Run:
    """What every hook is handed when the run begins (pfl-research hands its callbacks the model).

    It is the run's context, built once by the server assembly
    (fedbench.server.app): the experiment, the run folder's writers, the
    ledger, the selector and the Flower strategy, the console's rounds task,
    and the crash-safe way to save a checkpoint.
    """

    experiment: Experiment
    run_dir: Path
    writer: RunWriter  # rounds.csv and summary.json
    server_rounds: ServerRoundsWriter  # server_rounds.csv
    ledger: Ledger
    selector: SelectionStrategy
    algorithm: Strategy  # the wrapped Flower strategy
    unit: str  # what the scenario calls a step: "day" or "round"
    wall_start: float  # host perf_counter at the start
    task: Task  # the console's rounds progress
    save: Callable[[Checkpoint], None]  # a checkpoint the folder's rows are vouched by
    availability: Availability = field(default_factory=Availability)
    warnings: list[str] = field(default_factory=list)  # summary.json `warnings`, one line each


class ServerHook:
    """Something that happens around a run and its rounds; every override is optional.

    The callbacks of pfl-research's training process, on fedbench's round
    loop. A hook in the `hooks` group (fedbench/conf/hooks) is built from its
    `_target_` with the group's keys and finds the rest in the `Run`.
    """

    def on_run_begin(self, run: Run) -> None:
        """Before the first round (or the first after a resume)."""

    def before_round(self, spec: RoundSpec, now_s: float) -> None:
        """The round is about to select devices at virtual time `now_s`."""

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> Stop | None:
        """The round is over and `state` is the loop's state after it; a Stop ends the run."""
        return None

    def on_run_end(self, run: Run, status: str) -> None:
        """The run ended (`status`: completed, failed or interrupted), before its summary."""
