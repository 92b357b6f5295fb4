"""Device selection composed with any Flower strategy: selection is fedbench's, the rest Flower's.

`FleetStrategy` wraps a Flower strategy (`algorithm=`: FedAvg, FedProx,
FedAdam, FedMedian, Krum, ... from `flwr.serverapp.strategy`, or the one a
user's app names) the way Flower's DP wrappers wrap one
(`DifferentialPrivacyServerSideFixedClipping`): it is a Strategy itself and
delegates what it does not change.

fedbench's own ServerApp runs it as a Flower app runs its strategy:
`start()` (Flower's own, not overridden) on the FleetGrid
(fedbench.server.fleet_grid, fedbench.server.own_app), the grid every app
runs on:

- `configure_train`: asking the grid for its nodes opens the round there:
  fedbench's selector (`strategy=`, strategies/) picks the devices from the
  ledger at the virtual clock (`begin_round`); the wrapped strategy then
  builds its messages as if the grid had exactly those devices (so FedProx
  adds its `proximal-mu`, FedAvg its `server-round`), one per device,
  addressed `device index + 1` as a user app's strategy addresses them. The
  grid routes each to the node that carries the device, with its task record
  (`route_train`), as it does any app's.
- `aggregate_train`: the wrapped strategy's, on the clean updates the round
  accepted, cast back to the global model's dtypes (`keep_dtypes`); the
  round's aggregate is kept (`aggregated`) for the round's records.
- `configure_evaluate` / `aggregate_evaluate`: the wrapped strategy's, on
  the round's devices (fedbench's algorithms send none: `fraction_evaluate`
  0, the server evaluates on its test split).

`start()` numbers its rounds from 1; the wrapped strategy is told the
schedule's round (`first_round`: the rounds done before this `start()`, a
resumed run's checkpoint round), so a rolling window (FedRolex) or a
server-round config continues where the checkpoint left off.

Clients must send what the wrapped strategy aggregates (one ArrayRecord,
`metrics` with `num-examples`); fedbench's device mod adds the RoundReport.

Each device's own `context.state` (what an algorithm's client half keeps
across rounds: SCAFFOLD's control variate) travels with its train message and
comes back with its reply (`with_states`, `keep_states`): in simulation a
worker node serves whichever devices a round names, so the node's Context is
not the device's. A device whose reply was lost keeps its last state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fedbench.core.device import DeviceSpec, Traits
from fedbench.core.seating import Seating
from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from fedbench.protocol import (
    CONTEXT_PREFIX,
    GROUP_SEPARATOR,
    TASK,
    TrainTask,
    context_records,
    tasks_record,
)
from fedbench.scenarios.base import RoundSpec
from fedbench.server.offer import ASKS_PER_CONFIGURE, MINIMUM_SETTINGS, Offer, TooFewDevices, demand
from fedbench.server.replies import Sent, keep_dtypes
from strategies.base import SelectionStrategy


@dataclass(frozen=True)
class RoundStart:
    spec: RoundSpec
    now_s: float  # virtual time the round starts
    model_version: int  # version of the global model it sends


@dataclass(frozen=True)
class Aggregate:
    """What the wrapped strategy made of a round's updates (arrays None: the model stays)."""

    arrays: ArrayRecord | None
    metrics: MetricRecord | None


class FleetStrategy(Strategy):
    def __init__(
        self,
        inner: Strategy,
        selector: SelectionStrategy,
        ledger: Ledger,
        seating: Seating,
        experiment_json: str,
        kinds: Sequence[str] | np.ndarray,
        traits: Callable[[int, int], Traits | None] | None = None,
    ) -> None:
        self.inner = inner
        self.selector = selector
        self.ledger = ledger
        self.seating = seating
        self.experiment_json = experiment_json
        # Per device: the meter kind its node reports (emulated, physical, host).
        self.kinds = kinds
        # (round, device) -> the device's population draw for its message (FleetView.traits)
        self.traits = traits
        self.round_start: RoundStart | None = None
        self.picked: list[int] = []
        self.sent: list[Sent] = []
        self.skipped = ""  # why a round trained nobody, if it did not
        self.states: dict[int, RecordDict] = {}  # device index -> its context.state
        self.first_round = 0  # rounds done before start() began (its round 1 is the next)
        self.model = ArrayRecord()  # the global model the round's training was sent
        self.aggregated: Aggregate | None = None  # the round's aggregate, once made

    def begin_round(
        self, start: RoundStart, wanted: int | None = None, busy: Collection[int] = ()
    ) -> None:
        """The round about to be configured (the loop calls this before configure_train).

        `wanted` devices instead of the selector's round size, none of them `busy`
        (devices still training, in asynchronous FL).
        """
        self.round_start = start
        busy = np.asarray(sorted(busy), dtype=np.int64)
        available = self.ledger.available[busy].copy()
        self.ledger.available[busy] = False
        try:
            chosen = self.selector.select(self.ledger, start.spec.round, start.now_s, wanted)
        finally:
            self.ledger.available[busy] = available
        self.picked = [int(i) for i in chosen]
        self.sent = []
        self.aggregated = None
        self.skipped = "" if self.picked else "no eligible device (availability, memory)"

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Flower's start() asks: the grid opens the round, the wrapped strategy configures it.

        On fedbench's FleetGrid the node-id ask is what opens a round (its selector
        picks, `begin_round`), as for any app's strategy; the messages come back
        addressed to the picked devices, and the grid routes them.
        """
        grid.get_node_ids()
        return self.train_messages(self.first_round + server_round, arrays, config)

    def train_messages(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord
    ) -> list[Message]:
        """The wrapped strategy's train messages for the picked devices, one per device.

        `config` is copied: strategies write into it (FedAvg its `server-round`), and
        start() hands the same record to every round.
        """
        self._started(server_round)
        self.model = arrays
        fresh = ConfigRecord(dict(config))
        return self._from_inner(
            lambda offer: self.inner.configure_train(server_round, arrays, fresh, offer)
        )

    def with_states(self, messages: list[Message]) -> list[Message]:
        """Each message with its device's context state, where the device has one."""
        out = []
        for message in messages:
            state = self.states.get(Offer.device_of(message))
            if state:
                content = RecordDict(dict(message.content))
                content.update(context_records(state))  # type: ignore[arg-type]
                message = Message(metadata=message.metadata, content=content)  # type: ignore[call-overload]
            out.append(message)
        return out

    def keep_states(self, replies: list[Message], sent: Sequence[Sent]) -> list[Message]:
        """The replies without the context states they carry, which are kept per device."""
        devices: dict[str, list[int]] = {}
        for s in sent:
            devices.setdefault(s.message.metadata.message_id, []).append(s.device.index)
        return split_states(replies, devices, self.states)

    def route_train(self, messages: list[Message]) -> list[Message]:
        """The round's train messages (one per device, addressed `device index + 1`) as
        they go to the nodes, with their task records; `sent` lists whom they are for."""
        start = self._started(self._round())
        routed = self._route(messages, start, with_state=True)
        self.sent = [
            Sent(device, msg, self.kinds[device.index], start.now_s, start.model_version, 0.0)
            for device, msg in routed
        ]
        return list({id(msg): msg for _, msg in routed}.values())

    def route_one_each(self, messages: list[Message]) -> list[tuple[DeviceSpec, Message]]:
        """Messages that are not the round's training (evaluation, a protocol's stages),
        each to its device's node with a task record, one device a message."""
        start = self._started(self._round())
        return self._route(messages, start, with_state=False, group=False)

    def _round(self) -> int:
        return -1 if self.round_start is None else self.round_start.spec.round

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The wrapped strategy's aggregate of the accepted updates, in the model's dtypes.

        A round without an update is not aggregated (the model stays). Flower
        averages integer arrays to float64, and one float64 update must not
        promote the model: the aggregate is cast back (`keep_dtypes`).
        """
        replies = list(replies)
        if not replies:
            self.aggregated = Aggregate(None, None)
            return None, None
        new, metrics = self.inner.aggregate_train(self.first_round + server_round, replies)
        arrays = None if new is None else keep_dtypes(new, self.model)
        self.aggregated = Aggregate(arrays, metrics)
        return arrays, metrics

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Federated evaluation on the round's devices, if the wrapped strategy asks for it;
        addressed to the devices, as the train messages are (the grid routes them)."""
        start = self.round_start
        if start is None or start.spec.round != self.first_round + server_round:
            return []  # before round 1 no device has been picked to evaluate on
        number = start.spec.round
        return self._from_inner(
            lambda offer: self.inner.configure_evaluate(number, arrays, config, offer)
        )

    def _route(
        self, messages: list[Message], start: RoundStart, with_state: bool, group: bool = True
    ) -> list[tuple[DeviceSpec, Message]]:
        """Each wrapped-strategy message, with its task record, to the node of its device.

        Devices whose messages carry the same content (Flower's strategies send one
        RecordDict to all) share a message when the seating puts several devices in
        one worker call; each device is then listed in that message's task record.
        """
        per_call = self.seating.devices_per_call(len(messages)) if group else 1
        calls = _calls(messages, per_call)
        out: list[tuple[DeviceSpec, Message]] = []
        for slot, call in enumerate(calls):
            devices = [self.ledger.devices[Offer.device_of(msg)] for msg in call]
            tasks = [
                TrainTask(
                    round=start.spec.round,
                    day=start.spec.day,
                    device_index=device.index,
                    device=device.name,
                    now_s=start.now_s,
                    model_version=start.model_version,
                    state=self.ledger.state(device.index) if with_state else None,
                    traits=self.traits(start.spec.round, device.index) if self.traits else None,
                )
                for device in devices
            ]
            content = RecordDict(dict(call[0].content))
            content[TASK] = tasks_record(tasks, self.experiment_json)
            routed = Message(
                content=content,
                dst_node_id=self.seating.node_for(devices[0].index, slot),
                message_type=call[0].metadata.message_type,
            )
            out.extend((device, routed) for device in devices)
        return out

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(self.first_round + server_round, replies)

    def summary(self) -> None:
        self.inner.summary()

    def _started(self, server_round: int) -> RoundStart:
        start = self.round_start
        if start is None or start.spec.round != server_round:
            raise RuntimeError("FleetStrategy.begin_round must be called for each round first")
        return start

    def _from_inner(self, configure: object) -> list[Message]:
        """The wrapped strategy's messages for an offer of exactly the picked devices."""
        if not self.picked:
            return []
        wants = demand(self.inner)
        if wants is not None and wants > len(self.picked):
            self.skipped = (
                f"the Flower strategy (algorithm=) waits for more than the {len(self.picked)} "
                f"device(s) picked this round (it needs {wants})"
            )
            return []
        # A strategy that names its minimum never waits now; one that does not is watched.
        offer = Offer(self.picked, patience=None if wants is not None else ASKS_PER_CONFIGURE)
        try:
            messages = list(configure(offer))  # type: ignore[operator]
        except TooFewDevices as exc:
            self.skipped = str(exc)
            return []
        return sorted(messages, key=Offer.device_of)


def _calls(messages: list[Message], per_call: int) -> list[list[Message]]:
    """Consecutive messages with the same content, at most `per_call` to a call."""
    calls: list[list[Message]] = []
    for msg in messages:
        last = calls[-1] if calls else None
        if last is not None and len(last) < per_call and last[0].content is msg.content:
            last.append(msg)
        else:
            calls.append([msg])
    return calls


def check_minimums(inner: Strategy, clients_per_round: int) -> None:
    """Refuse a wrapped strategy that could never sample from the devices fedbench offers."""
    from fedbench.server.algorithm_checks import check_parameters

    check_parameters(inner, clients_per_round)
    for key in MINIMUM_SETTINGS:
        value = getattr(inner, key, None)
        if isinstance(value, int) and value > clients_per_round:
            raise FedbenchError(
                f"algorithm.{key}={value} but strategy.clients_per_round={clients_per_round}: "
                f"the Flower strategy samples from the devices fedbench picks each round; "
                f"set algorithm.{key} <= {clients_per_round}"
            )


def split_states(
    replies: list[Message], devices: Mapping[str, list[int]], states: dict[int, RecordDict]
) -> list[Message]:
    """The replies without the context states they carry; each device's goes into `states`.

    Parameters
    ----------
    replies:
        Replies as they came back from the nodes.
    devices:
        Message id a reply answers -> the indices of the devices that message was for.
    states:
        Device index -> its context.state, updated with what each device's call left.
    """
    out = []
    for reply in replies:
        mine = devices.get(reply.metadata.reply_to_message_id, [])
        if reply.has_error() or not mine:
            out.append(reply)
            continue
        rest, found = RecordDict(), dict[int, RecordDict]()
        for key, record in reply.content.items():
            index, name = _device_and_name(key, mine)
            if name.startswith(CONTEXT_PREFIX) and index in mine:
                found.setdefault(index, RecordDict())[name[len(CONTEXT_PREFIX) :]] = record
            else:
                rest[key] = record
        if not found:
            out.append(reply)
            continue
        states.update(found)
        out.append(Message(metadata=reply.metadata, content=rest))  # type: ignore[call-overload]
    return out


def _device_and_name(key: str, devices: list[int]) -> tuple[int, str]:
    """Whose record `key` of a reply is: a several-device reply names it "<index>:<name>"."""
    if len(devices) == 1:
        return devices[0], key
    index, _, name = key.partition(GROUP_SEPARATOR)
    return (int(index), name) if index.isdigit() else (-1, key)
