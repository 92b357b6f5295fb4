"""FedBuff on fedbench's clock: devices train at their own pace, the server aggregates a buffer.

The loop keeps `concurrency` devices training. Each is dispatched with the
global model of the moment it starts (its version is remembered) and
arrives at its own time: on the virtual clock in simulation (its emulated
round trip), on the host's clock in deployment (when its reply comes).
Arrivals are processed in time order; every `buffer_size` accepted updates
the server aggregates and the version advances. A device that arrives frees
its slot, which the selector fills with a new pick.

Processing in virtual-time order while the host trains devices in parallel:
an arrival can be taken from the queue once no device still training could
arrive before it. A device dispatched at t arrives no earlier than t plus
its network time (the emulator's round trip is compute plus network), so the
server waits for the replies in flight only when the next known arrival lies
beyond that bound. The order - and so every record - is the same on any
host, with any number of workers.

Stale updates are rebased before aggregation: a device that trained from
version v sends w_v + delta; the Flower strategy receives w_now + delta,
weighted by num-examples x the staleness weight s (FedBuff's server step
with a learning rate of 1, normalised by the weights). Aggregation stays the
wrapped strategy's. A strategy that does not weight by num-examples (a
median, a trimmed mean, Krum) would drop that weight silently, so the loop
asks first (`weighs_by_examples`: the same updates aggregated twice, their
weights swapped) and, where it does not, applies s to the update itself:
w_now + s x delta (a stale update counts less by moving the model less, as
in FedAsync's mixing). summary.json `async.staleness_applied_to` says which.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import random
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import Strategy

from fedbench.errors import FedbenchError
from fedbench.protocol import METRICS, NUM_EXAMPLES
from fedbench.report.progress import console
from fedbench.scenarios.base import RoundSpec
from fedbench.server.clock import EventClock
from fedbench.server.close import WaitForAll
from fedbench.server.close.base import Closing, RoundClose
from fedbench.server.loop import LoopParts, RoundLoop
from fedbench.server.modes import RunMode
from fedbench.server.offer import Offer, demand
from fedbench.server.replies import Reply, Sent
from fedbench.server.run import LoopState, RoundOutcome

Values = dict[str, np.ndarray]


@dataclass
class _Window:
    """What happened between two aggregations: one server_rounds.csv row."""

    start_s: float
    host_start: float
    picked: int = 0
    replies: list[Reply] = field(default_factory=list)
    waited_s: float = 0.0


@dataclass
class _Pending:
    """A message in flight: the round it was dispatched for and its devices."""

    spec: RoundSpec
    sent: list[Sent] = field(default_factory=list)


@dataclass(frozen=True)
class FedBuff(RunMode):
    """Buffered asynchronous aggregation (Nguyen et al., "Federated Learning with Buffered
    Asynchronous Aggregation", AISTATS'22).

    Up to `concurrency` devices train at once, each on the global model of its
    start; the server aggregates every `buffer_size` arrivals, each update
    weighted by its staleness s (the server versions since its device started):
    `constant` 1, or `polynomial` 1 / (1 + s)^staleness_exponent (the paper's
    1/sqrt(1+s) at 0.5). Updates staler than `max_staleness` are dropped
    (status timeout). A device that finishes is replaced by the selector's
    next pick. Clients send what the Flower strategy aggregates.
    """

    buffer_size: int = 10
    concurrency: int | None = None  # None: the strategy's clients_per_round x (1 + overcommit)
    staleness: Literal["constant", "polynomial"] = "polynomial"
    staleness_exponent: float = 0.5
    max_staleness: int | None = None

    name = "fedbuff"

    def __post_init__(self) -> None:
        for key in ("buffer_size", "concurrency", "max_staleness"):
            value = getattr(self, key)
            if value is None and key != "buffer_size":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (key != "max_staleness")
            ):
                raise FedbenchError(f"mode.{key} must be a positive integer, got {value!r}")
        if self.staleness not in ("constant", "polynomial"):
            raise FedbenchError(f"mode.staleness={self.staleness!r}: valid: constant, polynomial")
        exponent = self.staleness_exponent
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent < 0:
            raise FedbenchError(f"mode.staleness_exponent must be >= 0, got {exponent!r}")

    def check(self, fleet_size: int, picked: int, close: RoundClose) -> None:
        # FedBuff has no rounds to close: `close` does not apply (the loop says so at start).
        for key in ("buffer_size", "concurrency"):
            value = getattr(self, key)
            if value is not None and value > fleet_size:
                what = (
                    "an aggregation would wait for more updates than there are devices"
                    if key == "buffer_size"
                    else "no more devices than the fleet's can train at once"
                )
                raise FedbenchError(
                    f"mode.{key}={value} is larger than the fleet ({fleet_size} devices): {what}; "
                    f"choose 1..{fleet_size}" + (" or null" if key == "concurrency" else "")
                )

    def weight(self, staleness: int) -> float:
        """How much an update `staleness` versions old counts."""
        if self.staleness == "constant":
            return 1.0
        return float((1.0 + staleness) ** -self.staleness_exponent)

    def loop(self, parts: LoopParts) -> RoundLoop:
        return FedBuffLoop(parts, self)


# Virtual seconds without any device to pick before an asynchronous run gives up.
MAX_IDLE_S = 30 * 86_400.0


def weighs_by_examples(strategy: Strategy) -> bool:
    """Whether `strategy`'s aggregate moves with `num-examples` (a weighted mean does).

    Asked of copies through Flower's own calls: the same four updates
    (0, 1, 2, 3) are aggregated twice, their weights swapped ((1, 1, 1, 5),
    then (5, 1, 1, 1)); a weighted aggregate differs, a median, a trimmed
    mean or Krum does not. A strategy that cannot be asked is taken not to.
    The random state Flower's sampling draws from is put back.
    """
    flwr_logger = logging.getLogger("flwr")
    level, saved = flwr_logger.level, random.getstate()
    flwr_logger.setLevel(logging.ERROR)
    try:
        first = _probe(strategy, (1, 1, 1, 5))
        second = _probe(strategy, (5, 1, 1, 1))
        return not np.allclose(first, second)
    except Exception:  # noqa: BLE001 - any refusal means: not a weighted mean we can rely on
        return False
    finally:
        random.setstate(saved)
        flwr_logger.setLevel(level)


def _probe(strategy: Strategy, weights: tuple[int, ...]) -> np.ndarray:
    probe = copy.deepcopy(strategy)
    start = ArrayRecord({"w": Array(np.zeros(1))})
    devices = max(len(weights), demand(strategy) or 0)
    sent = list(probe.configure_train(1, start, ConfigRecord(), Offer(range(devices))))
    key = next(iter(sent[0].content.array_records))
    replies = [
        Message(
            RecordDict(
                {
                    key: ArrayRecord({"w": Array(np.array([float(i)]))}),
                    METRICS: MetricRecord({NUM_EXAMPLES: n}),
                }
            ),
            reply_to=msg,
        )
        for i, (n, msg) in enumerate(zip(weights, sent, strict=False))
    ]
    aggregated, _ = probe.aggregate_train(1, replies)
    assert aggregated is not None
    return np.asarray(aggregated["w"].numpy())


class FedBuffLoop(RoundLoop):
    def __init__(self, parts: LoopParts, mode: FedBuff) -> None:
        super().__init__(parts)
        self.mode = mode
        self._received_at: dict[str, float] = {}
        self.applied = 0
        self.discarded = 0
        self.staleness: list[int] = []
        # FedBuff has no rounds to close: a round_close the experiment sets (a deadline,
        # first k) does not apply, and the run says so instead of ignoring it silently.
        self.ignored_close = (
            "" if isinstance(parts.close, WaitForAll) else type(parts.close).__name__
        )
        # Where the staleness weight goes: the examples weight, or the update itself.
        self.by_examples = weighs_by_examples(parts.fleet.inner)
        if not self.by_examples:
            console.warn(
                f"mode=fedbuff: {type(parts.fleet.inner).__name__} does not weight updates by "
                "num-examples; each update's staleness weight scales the update itself "
                "(w + s x delta)"
            )
        if self.ignored_close:
            console.warn(
                f"mode=fedbuff: round_close ({self.ignored_close}) does not apply; FedBuff "
                f"aggregates every {mode.buffer_size} arrivals (mode.buffer_size) and bounds "
                "staleness with mode.max_staleness"
            )

    def run(self, schedule: Iterable[RoundSpec], state: LoopState) -> LoopState:
        specs = iter([s for s in schedule if s.round > state.round])
        spec = next(specs, None)
        clock: EventClock[Reply] = EventClock(state.now_s)
        concurrency = self.mode.concurrency or self.fleet.selector.wanted()
        versions: dict[int, Values] = {state.model_version: _values(state.arrays)}
        flights: dict[int, Sent] = {}  # device index -> its dispatch
        pending: dict[str, _Pending] = {}  # message id -> the devices whose reply is awaited
        buffer: list[Reply] = []
        window = _Window(clock.now_s, time.perf_counter())
        wall0 = time.time() - state.now_s  # wall mode: the clock is the host's, from the start
        idle_since = clock.now_s
        while spec is not None:
            if not flights and clock.now_s < spec.earliest_start_s:
                clock.advance(spec.earliest_start_s)  # nothing to wait for: idle to the next day
            free = concurrency - len(flights)
            if free > 0 and clock.now_s >= spec.earliest_start_s:
                self._fill(spec, clock.now_s, state, free, flights, pending)
                window.picked += len(self.in_flight)
            event = clock.peek()
            if event is not None and event.time_s <= self._horizon(pending, wall0):
                reply = clock.pop().what
                flights.pop(reply.device.index, None)
                reply = self._arrive(reply, clock.now_s, state.model_version)
                window.replies.append(reply)
                if reply.update is not None:
                    buffer.append(reply)
                if len(buffer) >= self.mode.buffer_size:
                    state = self._apply(spec, state, buffer, window, clock.now_s, versions)
                    if self.stopped is not None:
                        break  # what is still in flight is left there, as at the last round
                    versions = {v: versions[v] for v in {f.model_version for f in flights.values()}}
                    versions[state.model_version] = _values(state.arrays)
                    buffer, window = [], _Window(clock.now_s, time.perf_counter())
                    spec = next(specs, None)
                continue
            if pending:
                waited = time.perf_counter()
                for reply in self._receive(pending, state, wall0):
                    clock.schedule(self._arrival_s(reply, wall0), reply)
                window.waited_s += time.perf_counter() - waited
                continue
            if not flights:  # nobody can train now (availability): wait for the next hour
                if clock.now_s - idle_since > MAX_IDLE_S:
                    raise FedbenchError(
                        f"mode=fedbuff: no device could be picked for {MAX_IDLE_S / 86400:g} "
                        "virtual days (availability, memory); the run cannot go on"
                    )
                clock.advance(clock.now_s + 3600.0)
                continue
            idle_since = clock.now_s
        return state

    def summary(self) -> dict[str, object]:
        s = sorted(self.staleness)
        return {
            "async": {
                "mode": self.mode.name,
                "buffer_size": self.mode.buffer_size,
                "updates_applied": self.applied,
                "updates_discarded_stale": self.discarded,
                "round_close_ignored": self.ignored_close or None,
                "staleness_applied_to": "num-examples" if self.by_examples else "update",
                "staleness": {
                    "mean": statistics.fmean(s) if s else None,
                    "median": statistics.median(s) if s else None,
                    "p90": s[int(0.9 * (len(s) - 1))] if s else None,
                    "max": s[-1] if s else None,
                    "histogram": {str(v): s.count(v) for v in sorted(set(s))},
                },
            }
        }

    # -- steps ------------------------------------------------------------------------

    def _fill(
        self,
        spec: RoundSpec,
        now_s: float,
        state: LoopState,
        free: int,
        flights: dict[int, Sent],
        pending: dict[str, _Pending],
    ) -> None:
        for hook in self.hooks:
            hook.before_round(spec, now_s)
        messages = self.dispatch(spec, now_s, state, wanted=free, busy=flights.keys())
        self.push(messages)
        for sent in self.in_flight:
            flights[sent.device.index] = sent
            pending.setdefault(sent.message.metadata.message_id, _Pending(spec)).sent.append(sent)

    def _horizon(self, pending: Mapping[str, _Pending], wall0: float) -> float:
        """The earliest a device still training could arrive (wall clock: now)."""
        if self.wall_clock:
            return time.time() - wall0
        comm = self.fleet.ledger.pred_comm_s
        return min(
            (s.start_s + _finite(comm[s.device.index]) for p in pending.values() for s in p.sent),
            default=math.inf,
        )

    def _receive(self, pending: dict[str, _Pending], state: LoopState, wall0: float) -> list[Reply]:
        """Replies in flight: all of them (virtual clock), or what has come (wall clock)."""
        replies, received_at = self.pull(set(pending), wait_for_all=not self.wall_clock)
        self._received_at.update(received_at)
        now = time.time()
        if self.wall_clock:  # what came, and what waited longer than the round timeout
            done = {r.metadata.reply_to_message_id for r in replies}
            done |= {i for i, p in pending.items() if now - p.sent[0].sent_at > self.timeout_s}
        else:  # every device in flight: their arrivals are needed to order the queue
            done = set(pending)
        out: list[Reply] = []
        for message_id in done:
            p = pending.pop(message_id)
            mine = [r for r in replies if r.metadata.reply_to_message_id == message_id]
            out.extend(self.read(p.spec, mine, received_at, state.arrays, sent=p.sent))
        return out

    def _arrival_s(self, reply: Reply, wall0: float) -> float:
        if self.wall_clock:
            at = self._received_at.get(reply.instruction.metadata.message_id, time.time())
            return at - wall0
        end = reply.report.end_s
        return reply.report.start_s if math.isnan(end) else end

    def _arrive(self, reply: Reply, at_s: float, version: int) -> Reply:
        """The arrival at `at_s`: offline devices dropped, stale updates refused, staleness kept."""
        reply = self.still_there(reply, at_s)
        staleness = version - reply.report.model_version
        report = dataclasses.replace(reply.report, staleness=staleness, end_s=at_s)
        reply = dataclasses.replace(reply, report=report)
        if reply.update is None:
            return reply
        limit = self.mode.max_staleness
        if limit is not None and staleness > limit:
            self.discarded += 1
            why = f"stale: trained on version {report.model_version}, {staleness} > {limit} behind"
            return dataclasses.replace(
                reply, report=report.with_status("timeout", why), update=None
            )
        return reply

    def _apply(
        self,
        spec: RoundSpec,
        state: LoopState,
        buffer: list[Reply],
        window: _Window,
        now_s: float,
        versions: Mapping[int, Values],
    ) -> LoopState:
        """Aggregate the buffer into a new version and record the window as a round."""
        current = versions[state.model_version]
        rebased = [self._rebased(r, current, versions, state.model_version) for r in buffer]
        arrays, metrics = self.aggregate(spec.round, rebased, state.arrays)
        version = state.model_version + (arrays is not state.arrays)
        for reply in buffer:
            self.staleness.append(state.model_version - reply.report.model_version)
        self.applied += len(buffer)
        after = LoopState(spec.round, now_s, version, arrays)
        host_s = time.perf_counter() - window.host_start
        replies = [
            dataclasses.replace(r, report=dataclasses.replace(r.report, round=spec.round))
            for r in window.replies
        ]
        outcome = RoundOutcome(
            spec=spec,
            start_s=window.start_s,
            closing=Closing(
                now_s - window.start_s, {}, f"buffer of {len(buffer)} updates", self.mode.name
            ),
            replies=sorted(replies, key=lambda r: (r.report.end_s, r.device.name)),
            picked=window.picked,
            aggregated=len(buffer),
            model_version=version,
            train_metrics=metrics,
            evaluation=self.evaluator(spec.round, arrays) if spec.evaluate else None,
            host_round_s=host_s,
            server_s=host_s - window.waited_s,
            skipped=self.fleet.skipped if not buffer else "",
        )
        self.finish(outcome, after)
        return after

    def _rebased(
        self, reply: Reply, current: Values, versions: Mapping[int, Values], now: int
    ) -> Reply:
        """The update moved onto the current model, its staleness weight applied.

        On the examples weight where the strategy weighs by it, else on the
        update's delta (see the module docstring).
        """
        assert reply.update is not None
        trained_on = reply.report.model_version
        base = versions[trained_on]
        weight = self.mode.weight(now - trained_on)
        scale = 1.0 if self.by_examples else weight
        record = next(iter(reply.update.array_records.values()))
        moved = ArrayRecord(
            {
                k: Array(_moved(current[k], a.numpy() - base[k], scale, current[k].dtype))
                for k, a in record.items()
            }
        )
        metrics = reply.update.metric_records[METRICS]
        weighted = MetricRecord(dict(metrics))
        if self.by_examples:
            weighted[NUM_EXAMPLES] = float(metrics[NUM_EXAMPLES]) * weight  # type: ignore[arg-type]
        key = next(iter(reply.update.array_records))
        return dataclasses.replace(reply, update=RecordDict({key: moved, METRICS: weighted}))


def _moved(current: np.ndarray, delta: np.ndarray, scale: float, dtype: np.dtype) -> np.ndarray:
    """current + scale x delta in the model's dtype (scale 1: exactly current + delta)."""
    step = delta if scale == 1.0 else delta * scale
    return np.asarray(current + step, dtype=dtype)


def _values(arrays: ArrayRecord) -> Values:
    return {k: np.array(a.numpy()) for k, a in arrays.items()}


def _finite(x: float) -> float:
    return 0.0 if math.isnan(x) else float(x)
