"""What every round loop is built of: select, configure, push, pull, read, close, aggregate, record.

There is one loop for synchronous rounds: a ServerApp's own, on the
FleetGrid (fedbench.server.app_loop's AppLoop) - fedbench's own ServerApp
(fedbench.server.own_app: its FleetStrategy's `start()`) as much as a
user's. Asynchronous FL (fedbench.server.fedbuff) runs its own loop on the
event clock. Both are a `RoundLoop`: the building blocks here, which a
round goes through in this order:

1. **select + configure**: the FleetStrategy picks devices at the virtual
   clock and builds the wrapped Flower strategy's messages for them
   (`dispatch`; on the FleetGrid the app's strategy does it);
2. **collect**: they are pushed through Flower's Grid and the replies pulled
   until all are in or `round_timeout_s` (host seconds) passes;
3. **close**: every reply becomes a RoundReport (fedbench.server.replies),
   placed on the virtual clock (`arrivals`), and the round-close policy
   (`round_close=`) decides which count and how long the round lasted;
4. **aggregate**: the accepted updates go to the wrapped strategy;
5. **account + evaluate + record**: the clock advances; on evaluation
   rounds the global model is scored; the outcome goes to the hooks
   (`finish`: ledger, run folder, progress, checkpoint -
   fedbench.server.hooks), any of which may stop the run after the round (a
   target reached, a budget spent: fedbench.server.stopping).

Nothing here knows which runtime, app or selector it runs: those arrive
built. The loop's own state (round, clock, model) is what a checkpoint
restores.
"""

from __future__ import annotations

import dataclasses
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid

from fedbench.core import interrupt
from fedbench.scenarios.base import RoundSpec
from fedbench.server.clock import EventClock
from fedbench.server.close.base import Closing, RoundClose
from fedbench.server.defense import Defense
from fedbench.server.evaluation import Evaluator
from fedbench.server.fleet_strategy import FleetStrategy, RoundStart
from fedbench.server.replies import Reply, Sent, read_replies
from fedbench.server.run import LoopState, RoundOutcome, ServerHook, Stopped


@dataclass(frozen=True)
class LoopParts:
    """What the server assembly hands a run mode's loop (fedbench.server.modes)."""

    grid: Grid
    fleet: FleetStrategy
    close: RoundClose
    evaluator: Evaluator
    hooks: Sequence[ServerHook]
    train_config: ConfigRecord
    arrays_key: str
    timeout_s: float  # host seconds to wait for replies
    available_at: Callable[[int, float], bool] | None = None  # a device's availability at t
    wall_clock: bool = False  # physical devices: arrivals happen on the host's clock
    defense: Defense | None = None  # what keeps a hostile reply out of the aggregate


class RoundLoop(ABC):
    """A run mode's loop: its `run`, on the building blocks every mode shares."""

    def __init__(self, parts: LoopParts) -> None:
        self.grid = parts.grid
        self.fleet = parts.fleet
        self.close = parts.close
        self.evaluator = parts.evaluator
        self.hooks = list(parts.hooks)
        self.train_config = parts.train_config
        self.arrays_key = parts.arrays_key
        self.timeout_s = parts.timeout_s
        self.available_at = parts.available_at
        self.wall_clock = parts.wall_clock
        self.defense = parts.defense or Defense()
        self.in_flight: list[Sent] = []  # the devices of the last push
        # The server's own seconds per round, hooks (ledger, records, checkpoint) included.
        self.server_times: list[float] = []
        self.stopped: Stopped | None = None  # a hook ended the run early

    @abstractmethod
    def run(self, schedule: Iterable[RoundSpec], state: LoopState) -> LoopState:
        """Every round of `schedule` after `state.round`, until a hook stops the run."""

    # -- the building blocks every run mode shares -----------------------------------

    def dispatch(
        self,
        spec: RoundSpec,
        now_s: float,
        state: LoopState,
        wanted: int | None = None,
        busy: Collection[int] = (),
    ) -> list[Message]:
        """Pick devices at `now_s` and build their messages (self.fleet.sent lists them)."""
        self.fleet.begin_round(RoundStart(spec, now_s, state.model_version), wanted, busy)
        messages = self.fleet.train_messages(spec.round, state.arrays, self.train_config)
        return self.fleet.route_train(self.fleet.with_states(messages))

    def push(self, messages: list[Message]) -> set[str]:
        """Send the messages; the devices they are for are `self.fleet.sent`, now stamped."""
        pushed_at = time.time()
        self.in_flight = [dataclasses.replace(s, sent_at=pushed_at) for s in self.fleet.sent]
        if not messages:
            return set()
        return {i for i in self.grid.push_messages(messages) if i}

    def pull(
        self, ids: set[str], wait_for_all: bool, timeout_s: float | None = None
    ) -> tuple[list[Message], dict[str, float]]:
        """Replies to `ids`: all of them (or what came by the timeout), or the first to come.

        `timeout_s`: a caller's own, shorter limit (an app's send_and_receive timeout).
        """
        replies: list[Message] = []
        received_at: dict[str, float] = {}
        end = time.monotonic() + min(self.timeout_s, timeout_s or math.inf)
        ids = set(ids)
        while ids and time.monotonic() < end:
            for reply in self.grid.pull_messages(ids):
                replies.append(reply)
                received_at[reply.metadata.reply_to_message_id] = time.time()
                ids.discard(reply.metadata.reply_to_message_id)
            if not ids or (replies and not wait_for_all):
                break
            interrupt.check()  # or while it waits for replies
            time.sleep(0.05)
        return replies, received_at

    def read(
        self,
        spec: RoundSpec,
        replies: list[Message],
        received_at: dict[str, float],
        arrays: ArrayRecord,
        sent: Sequence[Sent] | None = None,
    ) -> list[Reply]:
        """Every sent device's reply as a report (and an update if it brought one)."""
        sent = self.in_flight if sent is None else sent
        replies = self.fleet.keep_states(replies, sent)  # each device's context.state
        return read_replies(
            spec.round, spec.day, sent, replies, arrays, self.arrays_key, received_at, self.defense
        )

    def arrivals(self, clock: EventClock[Reply], read: list[Reply]) -> list[Reply]:
        """Replies in arrival order on the clock; a device offline at its reply is dropped."""
        for reply in read:
            clock.schedule(_arrival_s(reply), reply)
        out = []
        while len(clock):
            reply = clock.pop().what
            out.append(self.still_there(reply, clock.now_s))
        return sorted(out, key=lambda r: r.device.name)

    def still_there(self, reply: Reply, at_s: float) -> Reply:
        """The reply, or `dropped` when the device's availability window closed before it."""
        if reply.report.status != "ok" or self.available_at is None:
            return reply
        if self.available_at(reply.device.index, at_s):
            return reply
        why = f"went offline before replying (availability window, virtual {at_s:.0f}s)"
        return dataclasses.replace(
            reply, report=reply.report.with_status("dropped", why), update=None
        )

    def aggregate(
        self, server_round: int, accepted: list[Reply], arrays: ArrayRecord
    ) -> tuple[ArrayRecord, MetricRecord | None]:
        """The wrapped Flower strategy's aggregate of the accepted updates (or `arrays`),
        in the global model's dtypes (FleetStrategy.aggregate_train)."""
        if not accepted:
            return arrays, None
        new, metrics = self.fleet.aggregate_train(server_round, [r.as_message() for r in accepted])
        return (arrays if new is None else new), metrics

    def summary(self) -> dict[str, object]:
        """What the run mode adds to summary.json (asynchronous FL: its staleness)."""
        return {}

    def finish(self, outcome: RoundOutcome, after: LoopState) -> None:
        """Every hook's round end; the first Stop ends the run after this round."""
        hooks_start = time.perf_counter()
        for hook in self.hooks:
            stop = hook.on_round_end(outcome, after)
            if stop is not None and self.stopped is None:
                self.stopped = Stopped(after.round, type(hook).__name__, stop.reason)
        self.server_times.append(outcome.server_s + time.perf_counter() - hooks_start)


def _arrival_s(reply: Reply) -> float:
    """When a reply reached the server on the virtual clock (at its start if it never ran)."""
    end = reply.report.end_s
    return reply.report.start_s if math.isnan(end) else end


def _late(reply: Reply, closing: Closing) -> Reply:
    """A reply the round did not wait for: timeout, its update dropped, its cost kept."""
    why = closing.late.get(reply.device.name)
    if why is None or reply.report.status != "ok":
        return reply
    return dataclasses.replace(reply, report=reply.report.with_status("timeout", why), update=None)
