"""The one synchronous round loop: a ServerApp drives the rounds, on a FleetGrid.

Every synchronous run is an app's ServerApp running its own loop on a
`FleetGrid` (fedbench.server.fleet_grid); `AppLoop` is what that grid asks.
The app is fedbench's own (fedbench.server.own_app: its FleetStrategy's
`start()`) or a user's (`app=`, `UserServerApp`): its `main` (or its legacy
`server_fn`, through Flower's compatibility layer) with its own strategy,
workflows (SecAgg+, DP), `start()` overrides and evaluation, as `flwr run`
runs it. The loop uses RoundLoop's building blocks (push, pull, the replies
read into reports, arrivals on the virtual clock, the round-close policy,
the hooks), so a round is accounted the same whichever app drives it.

Where a round begins and ends is read from what the app does, as Flower's
strategies and workflows do it:

1. **open**: the first node-id ask of a round (a strategy sampling for its
   training) closes the last round and selects: the selector picks the
   round's devices at the virtual clock, and they are the nodes the app sees;
2. **trained**: a train exchange whose messages carry a model is the round's
   training: each device's reply becomes its RoundReport, the close policy
   cuts the round, and the app gets the replies the round accepted (a late
   or dropped device's reply does not come, as a node timing out under
   Flower's grid); the stages of a protocol around it (SecAgg+'s key
   exchange and unmasking: train messages without a model) reach the same
   devices and their replies go back to the app as they are;
3. **evaluated**: the exchange after the training (the strategy's federated
   evaluation, sent even when it is empty) ends what the round asks of its
   devices (every number each reply returns is a row of client_metrics.csv);
   the next node-id ask opens the next round.

What a user app's strategy computes on the server (its aggregated train and
evaluation metrics, its `evaluate_fn`) is read as `Strategy.start` logs it
(fedbench.server.app_metrics); an app that evaluates otherwise is scored by
its clients' evaluation replies (examples-weighted). fedbench's own app hands
its server evaluation over as it makes it, and its FleetStrategy keeps the
round's aggregate (the model a checkpoint saves). The round count is the
schedule's: a user app's `num-server-rounds` is set to it (one console line
when that changes the app's own value), and an app that goes on regardless
is stopped as it begins the next round.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from flwr.app import (
    ArrayRecord,
    Context,
    Error,
    Message,
    MessageType,
    Metadata,
    MetricRecord,
    RecordDict,
)
from flwr.common.constant import ErrorCode

from fedbench.core import interrupt
from fedbench.core.records import ClientMetric
from fedbench.errors import FedbenchError
from fedbench.experiment.app import AppConfig, app_failure
from fedbench.protocol import (
    REPORT,
    STATE,
    TASK,
    UNREAD,
    reply_metrics,
)
from fedbench.scenarios.base import RoundSpec
from fedbench.server.app_metrics import flower_metrics
from fedbench.server.capture import Asks, TooFewNodes, load_server_app, working_directory
from fedbench.server.clock import EventClock
from fedbench.server.close.base import Closing
from fedbench.server.fleet_grid import (
    CUT,
    EVALUATING,
    FleetApp,
    FleetGrid,
    GridStop,
    Logged,
    RunOver,
    reraise,
)
from fedbench.server.fleet_strategy import RoundStart, split_states
from fedbench.server.loop import LoopParts, RoundLoop, _late
from fedbench.server.replies import Reply, read_replies
from fedbench.server.run import LoopState, RoundOutcome

ROUNDS_KEY = "num-server-rounds"  # the run-config key Flower's templates read
# What fedbench adds to a message or a reply; the app never sees them.
FEDBENCH_RECORDS = frozenset({TASK, REPORT, STATE, UNREAD})

OPEN, TRAINED, EVALUATED = "open", "trained", "evaluated"


@dataclass
class AppRound:
    """One round as the app drives it, from its selection to the next one's."""

    spec: RoundSpec
    clock: EventClock[Reply]
    start_s: float  # virtual time it started
    started: float  # host perf_counter when it opened
    phase: str = OPEN
    asks: Asks = field(default_factory=Asks)  # node-id asks since its last exchange
    waited: float = 0.0  # host seconds spent waiting for replies
    # The host round ends once its aggregate is made: at the first evaluation after the
    # training (the strategy's federated exchange, empty or not, or fedbench's own
    # evaluate_fn), else at the next round's open. Scoring the model is not the round's
    # (docs/results.md, host_round_s), as it was not in RoundLoop's rounds.
    ended: float | None = None
    waited_at_end: float = 0.0
    replies: list[Reply] = field(default_factory=list)
    closing: Closing | None = None
    model: ArrayRecord | None = None  # the global model its training was sent
    train_metrics: Mapping[str, float] | None = None  # the app's aggregate, as logged
    federated: Mapping[str, float] | None = None  # the app's aggregated evaluation, as logged
    central: Mapping[str, float] | None = None  # its evaluate_fn's, as logged
    replied: dict[str, float] = field(default_factory=dict)  # evaluation replies, weighted
    evaluated: list[ClientMetric] = field(default_factory=list)  # what each reply returned


class AppLoop(RoundLoop):
    """The rounds of a user's ServerApp (see the module docstring)."""

    def __init__(
        self,
        parts: LoopParts,
        app: FleetApp,
        day_zero: Callable[[dict[str, float]], None] | None = None,
    ) -> None:
        """`day_zero`: what is done with the app's evaluation of its initial model (None:
        nothing; fedbench's own is scored by the server assembly before the hooks begin)."""
        super().__init__(parts)
        self.app = app
        self.rounds = 0  # the schedule's rounds this run
        self.day_zero = day_zero
        self.state = LoopState(0, 0.0, 0, ArrayRecord())
        self.open: AppRound | None = None
        self.initial: Mapping[str, float] | None = None
        self.started_rounds = False
        self.thread = threading.get_ident()
        self._pending: list[RoundSpec] = []  # the schedule's rounds still to run
        self.over = Asks()  # node-id asks after the schedule's last round

    # -- the run ------------------------------------------------------------------

    def run(self, schedule: Iterable[RoundSpec], state: LoopState) -> LoopState:
        """The app's ServerApp, from its start to its end (or the schedule's)."""
        self._pending = [s for s in schedule if s.round > state.round]
        self.rounds = len(self._pending)
        self.state = state
        self.thread = threading.get_ident()
        # start() counts its rounds from 1: a wrapped strategy is told the schedule's.
        self.fleet.first_round = state.round
        self.app.run(FleetGrid(self, self.grid), state.arrays, self.rounds, self._logged)
        self._finish_open()
        if not self.started_rounds:
            self._start_rounds()
        return self.state

    # -- what the FleetGrid asks ----------------------------------------------------

    def node_ids(self) -> list[int]:
        # Flower's legacy layer also polls from a thread of its own: only the app's
        # own asks move the rounds on.
        if threading.get_ident() != self.thread:
            return [d + 1 for d in self.fleet.picked] if self.open is not None else []
        if self.open is None or self.open.phase == EVALUATED:
            if not self._pending:  # the schedule is done: no nodes (the app may be ending)
                self._finish_open()
                if self.over.wait():
                    self._over()
                return []
            self._next_round()
        assert self.open is not None
        if self.open.asks.wait():  # sample_nodes, waiting for more nodes
            raise TooFewNodes(self.app.name, len(self.fleet.picked))
        return [d + 1 for d in self.fleet.picked]

    def exchange(
        self, pairs: list[tuple[str, Message]], timeout: float | None, answer_all: bool = False
    ) -> list[Message]:
        if not pairs:  # a strategy's empty evaluation: the round asks no more of its devices
            if self.open is not None and self.open.phase == OPEN and self.app.own:
                return self._train([], answer_all)  # fedbench's own: nobody trained
            if self.open is not None and self.open.phase == TRAINED:
                self._end_host_round()  # start() asks this after the round's aggregate
                self.open.phase = EVALUATED
            return []
        kind = pairs[0][1].metadata.message_type.split(".")[0]
        if self.open is not None:
            self.open.asks.reset()
        if kind == MessageType.TRAIN and (self.app.own or _model_of(pairs[0][1]) is not None):
            if self.open is None or self.open.phase != OPEN:
                # It sampled before this round was open (no evaluation exchange between
                # two trainings): its messages go to the devices picked now.
                self._next_round()
                pairs = self._readdress(pairs)
            return self._train(pairs, answer_all)
        if self.open is None:
            self._next_round()
        replies = self._deliver(pairs, timeout, kind, answer_all)
        if kind == MessageType.EVALUATE and self.open is not None and self.open.phase == TRAINED:
            self.open.phase = EVALUATED
        return replies

    # -- rounds -----------------------------------------------------------------------

    def _next_round(self) -> None:
        self._finish_open()
        if not self.started_rounds:
            self._start_rounds()
        if self.stopped is not None:
            raise RunOver(self.stopped.reason)
        if not self._pending:
            self._over()
        spec = self._pending.pop(0)
        interrupt.check()  # a signal to the process: the run ends between rounds
        clock: EventClock[Reply] = EventClock(self.state.now_s)
        clock.advance(spec.earliest_start_s)
        started = time.perf_counter()
        for hook in self.hooks:
            hook.before_round(spec, clock.now_s)
        self.fleet.begin_round(RoundStart(spec, clock.now_s, self.state.model_version))
        self.open = AppRound(spec, clock, clock.now_s, started)

    def _over(self) -> None:
        _say(
            f"app {self.app.name}: the schedule's {self.rounds} round(s) are done; its "
            "ServerApp was stopped as it began another"
        )
        raise RunOver("the schedule is over")

    def _start_rounds(self) -> None:
        """Day 0: the app's evaluation of its initial model, if it made one."""
        self.started_rounds = True
        if self.day_zero is not None:
            self.day_zero(_numbers(self.initial))

    def _train(self, pairs: list[tuple[str, Message]], answer_all: bool) -> list[Message]:
        assert self.open is not None
        r = self.open
        self._check_addressed(pairs)
        key, model = self._model(pairs)
        routed = self.fleet.route_train(self._with_states(pairs))
        waiting = time.perf_counter()
        replies, received_at = self.pull(self.push(routed), wait_for_all=True)
        r.waited += time.perf_counter() - waiting
        replies = self.fleet.keep_states(replies, self.in_flight)
        read = read_replies(
            r.spec.round,
            r.spec.day,
            self.in_flight,
            replies,
            model,
            key,
            received_at,
            self.defense,
            as_is=not self.app.own,
        )
        read = self.arrivals(r.clock, read)
        closing = self.close.close([x.report for x in read], self.fleet.selector.clients_per_round)
        r.replies, r.closing, r.model = [_late(x, closing) for x in read], closing, model
        r.phase = TRAINED
        if self.app.own:  # its FleetStrategy aggregates the clean updates, as RoundLoop did
            return [x.as_message() for x in r.replies if x.update is not None]
        return self._for_app(pairs, answer_all)

    def _model(self, pairs: list[tuple[str, Message]]) -> tuple[str, ArrayRecord]:
        """The global model the round trains, and its name in the train messages.

        fedbench's own: the loop's (a submodel algorithm sends each device its slice);
        a user app's: what its first train message carries.
        """
        if self.app.own or not pairs:
            return self.arrays_key, self.state.arrays
        return _model_of(pairs[0][1]) or ("", ArrayRecord())

    def _for_app(self, pairs: list[tuple[str, Message]], answer_all: bool) -> list[Message]:
        """The round's replies as a user app's grid gives them: the accepted ones, as written."""
        assert self.open is not None
        r = self.open
        by_device = {m.metadata.dst_node_id - 1: (i, m) for i, m in pairs}
        out = []
        for x in r.replies:
            app_id, message = by_device[x.device.index]
            if x.report.status == "ok" and x.content is not None:
                out.append(_reply_for_app(x.content, app_id, message, x.device.index))
            elif answer_all:
                cut = f"{CUT}{x.report.status}: {x.report.reason}"
                why = Error(code=ErrorCode.UNKNOWN, reason=cut)
                out.append(_error_for_app(why, app_id, message, x.device.index))
        return out

    def _deliver(
        self, pairs: list[tuple[str, Message]], timeout: float | None, kind: str, answer_all: bool
    ) -> list[Message]:
        """An exchange that is not the round's training: each device's reply as it came."""
        assert self.open is not None
        self._end_host_round()  # an evaluation after the training: the aggregate is made
        self._check_addressed(pairs)
        by_device = {m.metadata.dst_node_id - 1: (i, m) for i, m in pairs}
        routed = self.fleet.route_one_each(self._with_states(pairs))
        ids = {i for i in self.grid.push_messages([m for _, m in routed]) if i}
        waiting = time.perf_counter()
        replies, _ = self.pull(ids, wait_for_all=True, timeout_s=timeout)
        self.open.waited += time.perf_counter() - waiting
        device_of = {m.metadata.message_id: d for d, m in routed}
        by_message = {i: [d.index] for i, d in device_of.items()}
        replies = split_states(replies, by_message, self.fleet.states)
        out = []
        for reply in replies:
            device = device_of.get(reply.metadata.reply_to_message_id)
            if device is None:
                continue
            app_id, message = by_device[device.index]
            failed = _failure_of(reply)
            if failed is not None:  # the device's call failed: an error reply, as Flower's
                out.append(_error_for_app(failed, app_id, message, device.index))
                continue
            out.append(_reply_for_app(reply.content, app_id, message, device.index))
            if kind == MessageType.EVALUATE:
                _weigh(self.open.replied, reply.content)
                self.open.evaluated += self._evaluated(device.name, reply.content)
        if answer_all:  # a poller waits for every reply: the missing ones, as errors
            answered = {m.metadata.reply_to_message_id for m in out}
            why = Error(code=ErrorCode.UNKNOWN, reason=f"{CUT}no reply by runtime.round_timeout_s")
            out += [
                _error_for_app(why, i, m, m.metadata.dst_node_id - 1)
                for i, m in pairs
                if i not in answered
            ]
        return out

    def _evaluated(self, device: str, content: RecordDict) -> list[ClientMetric]:
        """An evaluate reply's numbers as client_metrics.csv rows of the open round."""
        assert self.open is not None
        spec = self.open.spec
        return [
            ClientMetric(spec.round, spec.day, device, MessageType.EVALUATE, *metric)
            for metric in reply_metrics(content)
        ]

    def _end_host_round(self) -> None:
        """The open round's host time ends here, if it trained and has not ended yet."""
        r = self.open
        if r is not None and r.phase != OPEN and r.ended is None:
            r.ended, r.waited_at_end = time.perf_counter(), r.waited

    def _finish_open(self) -> None:
        """The open round's outcome to the hooks (rows, ledger, progress, stopping)."""
        r, self.open = self.open, None
        if r is None or r.closing is None:
            return  # selected, never trained (the app ended): nothing happened to record
        evaluation = _numbers(r.central) or _numbers(r.federated) or _averaged(r.replied)
        aggregated, arrays, advanced, train_metrics = self._result(r)
        version = self.state.model_version + advanced
        start_s = r.start_s
        ended = time.perf_counter() if r.ended is None else r.ended
        host_s = ended - r.started
        waited = r.waited if r.ended is None else r.waited_at_end
        after = LoopState(r.spec.round, start_s + r.closing.duration_s, version, arrays)
        outcome = RoundOutcome(
            spec=r.spec,
            start_s=start_s,
            closing=r.closing,
            replies=r.replies,
            picked=len(self.fleet.picked),
            aggregated=aggregated,
            model_version=version,
            train_metrics=train_metrics,
            evaluation=evaluation or None,
            host_round_s=host_s,
            server_s=host_s - waited,
            skipped=self.fleet.skipped,
            # Replies come in any order; the rows go by device (stable: a device's own order).
            evaluate_metrics=tuple(sorted(r.evaluated, key=lambda m: m.device)),
        )
        self.finish(outcome, after)
        self.state = after

    def _result(self, r: AppRound) -> tuple[int, ArrayRecord, bool, MetricRecord | None]:
        """(updates aggregated, the model after the round, whether it is a new version,
        the aggregate's metrics).

        fedbench's own: what its FleetStrategy aggregated (the model stays when it
        aggregated nothing). A user app keeps its model to itself: the one the
        round's training was sent stands for it, a new version when an update
        was accepted.
        """
        if self.app.own:
            made = self.fleet.aggregated
            accepted = sum(x.update is not None for x in r.replies)
            if made is None or made.arrays is None:
                return accepted, self.state.arrays, False, made.metrics if made else None
            return accepted, made.arrays, True, made.metrics
        aggregated = sum(x.report.status == "ok" for x in r.replies)
        assert r.model is not None
        metrics = MetricRecord(dict(r.train_metrics)) if r.train_metrics else None
        return aggregated, r.model, aggregated > 0, metrics

    # -- each device's own context.state ---------------------------------------------

    def _with_states(self, pairs: list[tuple[str, Message]]) -> list[Message]:
        """The app's messages, each with its device's context state (the FleetStrategy's)."""
        return self.fleet.with_states([m for _, m in pairs])

    # -- what the app's strategy logged ---------------------------------------------

    def _logged(self, kind: str, record: Mapping[str, float]) -> None:
        if kind == "initial":
            self.initial = record
            return
        r = self.open
        if r is None:
            return
        if kind == EVALUATING:
            self._end_host_round()
            return
        if kind == "central":
            r.central = record
        elif r.phase == TRAINED:
            r.train_metrics = record
        else:
            r.federated = record

    # -- addresses --------------------------------------------------------------------

    def _check_addressed(self, pairs: list[tuple[str, Message]]) -> None:
        offered = set(self.fleet.picked)
        seen: set[int] = set()
        for _, message in pairs:
            device = message.metadata.dst_node_id - 1
            if device not in offered or device in seen:
                why = "twice" if device in seen else "which fedbench did not offer this round"
                raise FedbenchError(
                    f"app {self.app.name}: its ServerApp sent a {message.metadata.message_type} "
                    f"message to node {message.metadata.dst_node_id}, {why} (the nodes are "
                    "the round's picked devices, from grid.get_node_ids())"
                )
            seen.add(device)

    def _readdress(self, pairs: list[tuple[str, Message]]) -> list[tuple[str, Message]]:
        picked = self.fleet.picked
        out = []
        for (app_id, m), device in zip(pairs, picked, strict=False):
            again = Message(
                m.content,
                dst_node_id=device + 1,
                message_type=m.metadata.message_type,
                group_id=m.metadata.group_id,
            )
            out.append((app_id, again))
        return out


@dataclass
class UserServerApp:
    """A user's Flower app (`app=`): its ServerApp, run as `flwr run` runs it, on the grid.

    What it writes with relative paths lands in `folder` (the run folder);
    what its strategy computes on the server is read from Flower's log
    (fedbench.server.app_metrics).
    """

    app: AppConfig
    folder: Path
    own = False

    @property
    def name(self) -> str:
        return self.app.name

    def run(self, grid: FleetGrid, initial: ArrayRecord, rounds: int, logged: Logged) -> None:
        with flower_metrics(logged), working_directory(self.folder):
            run_server_app(self.app, grid, self.context(grid, rounds))

    def context(self, grid: FleetGrid, rounds: int) -> Context:
        """The ServerApp's context: the app's run config, its round count the schedule's."""
        run_config = dict(self.app.run_config)
        declared = run_config.get(ROUNDS_KEY)
        if declared is not None and declared != rounds:
            _say(
                f"app {self.app.name}: {ROUNDS_KEY}={declared} in its config; fedbench's "
                f"schedule has {rounds} round(s) (scenario=), and the app runs those"
            )
        if declared is not None:
            run_config[ROUNDS_KEY] = rounds
        run = getattr(grid.inner, "run", None)
        run_id = int(getattr(run, "run_id", 0) or 0)
        return Context(
            run_id=run_id, node_id=0, node_config={}, state=RecordDict(), run_config=run_config
        )


def run_server_app(app: AppConfig, grid: FleetGrid, context: Context) -> None:
    """The app's ServerApp on `grid`, until it returns or fedbench ends the run.

    The app's own exception is one line naming the app, its file:line and the
    exception (fedbench.experiment.app.app_failure); what fedbench raised in the
    grid (a failure of its own, a signal) comes out as itself, never as the app's.
    """
    server_app = load_server_app(app)
    try:
        server_app(grid, context)
    except GridStop:
        pass
    except Exception as exc:  # the app's own code, unless fedbench stopped it first
        if grid.raised is None:
            raise app_failure(app.name, f"its ServerApp {app.serverapp!r}", exc, app.root) from None
    reraise(grid)


def _say(line: str) -> None:
    from fedbench.server.hooks import progress

    progress(line)


def _model_of(message: Message) -> tuple[str, ArrayRecord] | None:
    """The model a train message carries: its one ArrayRecord (None: a protocol stage)."""
    records = message.content.array_records
    return next(iter(records.items())) if len(records) == 1 else None


def _metadata(app_id: str, message: Message, device: int) -> Metadata:
    """A reply's metadata as Flower's grid gives it: from the device's node, to the app's id."""
    meta = message.metadata
    return Metadata(
        run_id=meta.run_id,
        message_id=uuid.uuid4().hex,
        src_node_id=device + 1,
        dst_node_id=meta.src_node_id,
        reply_to_message_id=app_id,
        group_id=meta.group_id,
        created_at=time.time(),
        ttl=meta.ttl,
        message_type=meta.message_type,
    )


def _reply_for_app(content: RecordDict, app_id: str, message: Message, device: int) -> Message:
    mine = RecordDict({k: v for k, v in content.items() if k not in FEDBENCH_RECORDS})
    return Message(metadata=_metadata(app_id, message, device), content=mine)  # type: ignore[call-overload]


def _failure_of(reply: Message) -> Error | None:
    """Why a device's call failed: an error reply, or a device mod's report of a failure."""
    if reply.has_error():
        return reply.error
    report = reply.content.config_records.get(REPORT)
    if report is None or report.get("status", "ok") == "ok":
        return None
    status = report.get("status")
    reason = str(report.get("reason", status))
    return Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason)


def _error_for_app(error: Error, app_id: str, message: Message, device: int) -> Message:
    return Message(metadata=_metadata(app_id, message, device), error=error)  # type: ignore[call-overload]


def _numbers(metrics: Mapping[str, object] | None) -> dict[str, float]:
    if not metrics:
        return {}
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


EXAMPLES = "num-examples"  # what Flower's strategies weigh replies by


def _weigh(totals: dict[str, float], content: RecordDict) -> None:
    """Add one evaluation reply's metrics, weighted by its examples, to `totals`.

    The numbers of its MetricRecords and ConfigRecords, as the Message API
    (`num-examples`) or Flower's legacy EvaluateRes records (`num_examples`) put them.
    """
    values: dict[str, float] = {}
    for record in [*content.metric_records.values(), *content.config_records.values()]:
        values.update(_numbers(record))  # type: ignore[arg-type]
    n = values.pop(EXAMPLES, values.pop("num_examples", 0.0))
    if not n > 0:
        return
    totals[EXAMPLES] = totals.get(EXAMPLES, 0.0) + n
    for key, value in values.items():
        totals[key] = totals.get(key, 0.0) + value * n


def _averaged(totals: Mapping[str, float]) -> dict[str, float]:
    n = totals.get(EXAMPLES, 0.0)
    if n <= 0:
        return {}
    out = {k: v / n for k, v in totals.items() if k != EXAMPLES}
    out["num_examples"] = n
    return out
