"""The server's round loop: select, configure, collect, close, aggregate, account, evaluate, record.

One loop for every scenario, selector, Flower strategy and runtime. A round:

1. **select + configure**: the FleetStrategy picks devices at the virtual
   clock and builds the wrapped Flower strategy's messages for them;
2. **collect**: they are pushed through Flower's Grid and the replies pulled
   until all are in or `round_timeout_s` (host seconds) passes;
3. **close**: every reply becomes a RoundReport (fedbench.server.replies)
   and the round-close policy (`round_close=`) decides which count and how
   long the round lasted on the virtual clock;
4. **aggregate**: the accepted updates go to the wrapped strategy;
5. **account + evaluate + record**: the clock advances; on evaluation
   rounds the Evaluator scores the global model; the outcome goes to the
   hooks (ledger, run folder, progress, checkpoint - fedbench.server.hooks).

Nothing here knows which runtime, app or selector it runs: those arrive
built. The loop's own state (round, clock, model) is what a checkpoint
restores.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid

from fedbench.report.records import RoundReport
from fedbench.scenarios.base import RoundSpec
from fedbench.server.close.base import Closing, RoundClose
from fedbench.server.defense import Defense
from fedbench.server.evaluation import Evaluator
from fedbench.server.fleet_strategy import FleetStrategy, RoundStart
from fedbench.server.replies import Reply, keep_dtypes, read_replies


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


class RoundLoop:
    def __init__(
        self,
        grid: Grid,
        fleet: FleetStrategy,
        close: RoundClose,
        evaluator: Evaluator,
        hooks: Sequence[ServerHook],
        train_config: ConfigRecord,
        arrays_key: str,
        timeout_s: float,
        defense: Defense | None = None,
    ) -> None:
        self.grid = grid
        self.fleet = fleet
        self.close = close
        self.evaluator = evaluator
        self.hooks = list(hooks)
        self.train_config = train_config
        self.arrays_key = arrays_key
        self.timeout_s = timeout_s
        self.defense = defense or Defense()

    def run(self, schedule: Iterable[RoundSpec], state: LoopState) -> LoopState:
        """Every round of `schedule` after `state.round`."""
        for spec in schedule:
            if spec.round > state.round:
                state = self.run_round(spec, state)
        return state

    def run_round(self, spec: RoundSpec, state: LoopState) -> LoopState:
        now_s = max(state.now_s, spec.earliest_start_s)
        for hook in self.hooks:
            hook.before_round(spec, now_s)
        started = time.perf_counter()
        self.fleet.begin_round(RoundStart(spec, now_s, state.model_version))
        config = ConfigRecord(dict(self.train_config))  # strategies write into it
        messages = list(self.fleet.configure_train(spec.round, state.arrays, config, self.grid))
        replies, received_at = self._collect(messages)
        sent = [dataclasses.replace(s, sent_at=self._pushed_at) for s in self.fleet.sent]
        read = read_replies(
            spec.round,
            spec.day,
            sent,
            replies,
            state.arrays,
            self.arrays_key,
            received_at,
            self.defense,
        )
        closing = self.close.close([r.report for r in read], self.fleet.selector.clients_per_round)
        read = [_late(r, closing) for r in read]
        accepted = [r.as_message() for r in read if r.update is not None]
        arrays, metrics, version = state.arrays, None, state.model_version
        if accepted:
            new_arrays, metrics = self.fleet.aggregate_train(spec.round, accepted)
            if new_arrays is not None:
                arrays, version = keep_dtypes(new_arrays, state.arrays), version + 1
        host_s = time.perf_counter() - started
        after = LoopState(spec.round, now_s + closing.duration_s, version, arrays)
        evaluation = self.evaluator(spec.round, arrays) if spec.evaluate else None
        outcome = RoundOutcome(
            spec=spec,
            start_s=now_s,
            closing=closing,
            replies=read,
            picked=len(self.fleet.picked),
            aggregated=len(accepted),
            model_version=version,
            train_metrics=metrics,
            evaluation=evaluation,
            host_round_s=host_s,
            skipped=self.fleet.skipped,
        )
        for hook in self.hooks:
            hook.on_round(outcome, after)
        return after

    def _collect(self, messages: list[Message]) -> tuple[list[Message], dict[str, float]]:
        """Push the round's messages and pull replies until all are in or the timeout passes."""
        self._pushed_at = time.time()
        if not messages:
            return [], {}
        ids = {i for i in self.grid.push_messages(messages) if i}
        replies: list[Message] = []
        received_at: dict[str, float] = {}
        end = time.monotonic() + self.timeout_s
        while ids and time.monotonic() < end:
            for reply in self.grid.pull_messages(ids):
                replies.append(reply)
                received_at[reply.metadata.reply_to_message_id] = time.time()
                ids.discard(reply.metadata.reply_to_message_id)
            if ids:
                time.sleep(0.05)
        return replies, received_at


def _late(reply: Reply, closing: Closing) -> Reply:
    """A reply the round did not wait for: timeout, its update dropped, its cost kept."""
    why = closing.late.get(reply.device.name)
    if why is None or reply.report.status != "ok":
        return reply
    return dataclasses.replace(reply, report=reply.report.with_status("timeout", why), update=None)
