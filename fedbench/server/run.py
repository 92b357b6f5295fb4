"""A run as its hooks see it: the loop's state, one round's outcome, and the hook interface.

The round loop (fedbench.server.loop) and every hook (fedbench.server.hooks)
share these types; they sit below both so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from flwr.app import ArrayRecord, MetricRecord

from fedbench.core.records import RoundReport
from fedbench.scenarios.base import RoundSpec
from fedbench.server.close.base import Closing
from fedbench.server.replies import Reply


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

    @property
    def reports(self) -> list[RoundReport]:
        return [r.report for r in self.replies]

    @property
    def end_s(self) -> float:
        return self.start_s + self.closing.duration_s


class ServerHook:
    """Something that happens around every round; each override is optional."""

    def before_round(self, spec: RoundSpec, now_s: float) -> None:
        """The round is about to select devices at virtual time `now_s`."""

    def on_round(self, outcome: RoundOutcome, state: LoopState) -> None:
        """The round is over and `state` is the loop's state after it."""
