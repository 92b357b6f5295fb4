"""The device mod: any Flower ClientApp, seated as a fleet device and metered.

A Flower client mod (`flwr.clientapp.mod`: `(msg, context, call_next)`)
that wraps a ClientApp's handlers. For a fedbench message it

1. seats the node as the fleet device the message names (fedbench.client.seat)
   and takes fedbench's record out, so the handler sees exactly what the
   Flower strategy sent;
2. sets what the handler reads about its node: `partition-id` (the device's
   index: its share of the data) and `num-partitions` (the fleet's size) in
   `context.node_config`, with `fedbench-accelerator` (where the worker
   trains: "cpu" or "cuda:0", runtime.accelerator), and the app's run config
   in `context.run_config`;
3. applies the device's caps (torch threads = `runtime.client_cpus`; with
   `runtime.enforce_caps` the profile's threads, CPUs and memory, the call
   in a process of its own: fedbench.client.caps);
4. for a train message, runs the handler under the device's meter and adds
   the RoundReport and the device's state to the reply (fedbench.protocol),
   and the keys of the train config a client half needs that the handler
   never read (fedbench.client.reads: the server warns once per run).

How the handler's training is costed is the one hook a subclass overrides:
`DeviceMod` watches whatever the handler executes (an emulated device: the
aten ops it ran, emulated on the profile; a physical one: its probe);
`DeclaredDeviceMod` trusts a handler that plans and measures its own
training through the seat (fedbench's own ClientApp). Messages without a
fedbench record pass through untouched.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp.typing import ClientAppCallable

from fedbench.algorithms.base import load_algorithm
from fedbench.client.caps import capped_call, failure
from fedbench.client.reads import tracked, unread
from fedbench.client.seat import DEVICE_NAME_KEY, Seat, seat_of, seated
from fedbench.core.meter import Cost, WatchJob
from fedbench.core.records import CSV_FIELDS, RoundReport, to_record
from fedbench.protocol import (
    LOSS_KEYS,
    METRICS,
    NODE_NAME,
    NUM_EXAMPLES,
    REPORT,
    STATE,
    TASK,
    UNREAD,
    context_records,
    split_context,
    state_record,
)
from fedbench.runtime.base import build_runtime
from fedbench.train.accelerator import worker_device

PARTITION_ID = "partition-id"
# Where this worker trains, as torch spells it ("cpu", "cuda:0"): runtime.accelerator as the
# runtime resolved it. A Flower app may read it, or ask torch: Ray gave the worker its GPU.
ACCELERATOR = "fedbench-accelerator"
NUM_PARTITIONS = "num-partitions"

# The Cost fields that are RoundReport fields too (status, latency_s, energy_j, ...).
_COST_FIELDS = tuple(f.name for f in dataclasses.fields(Cost) if f.name in CSV_FIELDS)


class HandlerDidNotMeasure(RuntimeError):
    """A declared handler returned without measuring its training through the seat."""


class DeviceMod:
    """Seat, cap and meter a ClientApp's messages (see the module docstring)."""

    # The handler plans its memory (fedbench.client.caps.planning_share): a real
    # out-of-memory under the device's caps is planned again for less.
    plans_memory = False

    def __call__(self, msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
        seat = seat_of(msg, context)
        if seat is None:
            return call_next(msg, context)
        routed = msg
        msg, own = _without_task(msg)
        if seat.experiment.app is None:  # the device's own context.state too (client halves)
            with seated(seat), _as_device(context, seat, own, own_id=False):
                reply = self._handle(seat, msg, context, call_next)
                device_state = context.state
            if len(device_state) and not reply.has_error():
                reply.content.update(context_records(device_state))  # type: ignore[arg-type]
            return reply
        # A user app's call is the device's own: its node id (the one the app's ServerApp
        # addressed, which SecAgg+ keys its shares by) and its context.state, whichever
        # node carries it; the reply goes back as the node's, as Flower's link checks.
        msg.metadata.dst_node_id = seat.device.index + 1
        with seated(seat), _as_device(context, seat, own):
            reply = self._handle(seat, msg, context, call_next)
            device_state = context.state
        if reply.has_error():
            return Message(reply.error, reply_to=routed)
        content = RecordDict(dict(reply.content))
        content.update(context_records(device_state))  # type: ignore[arg-type]
        return Message(content, reply_to=routed)

    def _handle(
        self, seat: Seat, msg: Message, context: Context, call_next: ClientAppCallable
    ) -> Message:
        if msg.metadata.message_type.split(".")[0] != MessageType.TRAIN:
            return capped_call(seat, context, lambda: call_next(msg, context))
        load_algorithm(seat.experiment.algorithm.target)  # its client half's keys
        msg, configs = tracked(msg)
        reply = self._train(seat, msg, context, call_next)
        missed = unread(configs)
        if missed and reply.content.array_records:  # it trained, without them
            reply.content[UNREAD] = ConfigRecord({"keys": missed})
        return reply

    def _train(
        self, seat: Seat, msg: Message, context: Context, call_next: ClientAppCallable
    ) -> Message:
        start = time.perf_counter()
        try:
            reply, cost = capped_call(
                seat,
                context,
                lambda: self.metered(seat, msg, context, call_next),
                self.plans_memory,
            )
        except Exception as exc:  # noqa: BLE001 - a device failure is data, reported with its reason
            traceback.print_exc()
            reply = Message(RecordDict(), reply_to=msg)
            status, reason = failure(exc)
            cost = Cost(status=status, reason=reason)
        if cost.status != "ok":  # the device could not have produced this update
            for key in list(reply.content.array_records):
                del reply.content[key]
        report = _report(seat, cost, reply)
        report = dataclasses.replace(
            report, host_wall_s=time.perf_counter() - start, worker=worker_name()
        )
        record = to_record(report)
        announced = context.node_config.get(DEVICE_NAME_KEY)
        if isinstance(announced, str) and announced:  # a physical device's claim, checked
            record[NODE_NAME] = announced
        reply.content[REPORT] = record
        if cost.state_after is not None:
            reply.content[STATE] = state_record(cost.state_after)
        return reply

    def metered(
        self, seat: Seat, msg: Message, context: Context, call_next: ClientAppCallable
    ) -> tuple[Message, Cost]:
        """Run the handler and say what its training cost: watched from outside."""
        job = WatchJob(
            model_name=seat.experiment.app.name if seat.experiment.app else "app",
            model_bytes=_array_bytes(msg),
            now_s=seat.task.now_s,
            state=seat.task.state,
        )
        with seat.meter.watch(job) as watch:
            reply = call_next(msg, context)
        if seat.measured.cost is not None:  # the handler measured itself after all
            return reply, seat.measured.cost
        return reply, watch.cost()


class DeclaredDeviceMod(DeviceMod):
    """For a handler that measures its own training with `current_seat().measure`."""

    plans_memory = True

    def metered(
        self, seat: Seat, msg: Message, context: Context, call_next: ClientAppCallable
    ) -> tuple[Message, Cost]:
        reply = call_next(msg, context)
        if seat.measured.cost is None:
            raise HandlerDidNotMeasure("the train handler did not call current_seat().measure")
        return reply, seat.measured.cost


device_mod = DeviceMod()


@contextmanager
def _as_device(
    context: Context, seat: Seat, state: RecordDict | None = None, own_id: bool = True
) -> Iterator[None]:
    """The node's partition id, run config and (`state`) context state, as the seated
    device's, for the call (`own_id`: its node id too, the one a user app addressed)."""
    saved = dict(context.node_config), dict(context.run_config)
    node_state, node_id = context.state, context.node_id
    if state is not None:  # the device's own context state (a user app: its node id too)
        context.state = state
        if own_id:
            context.node_id = seat.device.index + 1  # the id the app's ServerApp addressed
    context.node_config[PARTITION_ID] = seat.device.index
    context.node_config[NUM_PARTITIONS] = seat.num_devices
    accelerator = build_runtime(seat.experiment).worker_accelerator()
    context.node_config[ACCELERATOR] = str(worker_device(accelerator))
    app = seat.experiment.app
    if app is not None:
        for key, value in app.run_config.items():
            context.run_config.setdefault(key, value)
    try:
        yield
    finally:
        context.state, context.node_id = node_state, node_id
        context.node_config.clear()
        context.node_config.update(saved[0])
        context.run_config.clear()
        context.run_config.update(saved[1])


def _without_task(msg: Message) -> tuple[Message, RecordDict]:
    """The message as the Flower strategy built it, fedbench's records taken out, and the
    device's context state it carried.

    A new message with the same metadata (the app replies to it as to the
    original); the original stays whole for whoever else reads it (the group).
    """
    content, state = split_context(RecordDict({k: v for k, v in msg.content.items() if k != TASK}))
    return Message(metadata=copy.copy(msg.metadata), content=content), state  # type: ignore[call-overload]


def worker_name() -> str:
    """Where the training ran: host and process, and the Ray node inside a Ray worker."""
    name = f"{socket.gethostname()}:{os.getpid()}"
    ray = sys.modules.get("ray")  # never imported here: a device without Ray has none
    if ray is not None and ray.is_initialized():
        name += f"@{ray.get_runtime_context().get_node_id()[:8]}"
    return name


def _array_bytes(msg: Message) -> int:
    return sum(record.count_bytes() for record in msg.content.array_records.values())


def _metrics(reply: Message) -> dict[str, float]:
    records = reply.content.metric_records
    record = records.get(METRICS) or next(iter(records.values()), None)
    if record is None:
        return {}
    return {k: v for k, v in record.items() if isinstance(v, (int, float))}


def _report(seat: Seat, cost: Cost, reply: Message) -> RoundReport:
    metrics = _metrics(reply)
    trained = cost.status == "ok" and any(
        isinstance(r, ArrayRecord) for r in reply.content.array_records.values()
    )
    loss = seat.measured.loss
    if loss is None:
        loss = next((float(metrics[k]) for k in LOSS_KEYS if k in metrics), math.nan)
    comm = 0.0 if math.isnan(cost.comm_s) else cost.comm_s
    round_trip = cost.latency_s + comm if not math.isnan(cost.latency_s) else math.nan
    fields: dict[str, object] = {k: getattr(cost, k) for k in _COST_FIELDS}
    state = seat.task.state
    start = state.battery_pct if state is not None else math.nan
    fields.update(
        battery_pct_start=cost.extra.get("battery_pct_start", start),
        comm_energy_j=cost.extra.get("comm_energy_j", math.nan),
        plan_needed_mb=cost.extra.get("plan_needed_mb", math.nan),
        round_trip_s=round_trip,
        end_s=seat.task.now_s + round_trip,
        num_examples=int(metrics.get(NUM_EXAMPLES, 0)) if trained else 0,
        train_loss=loss if loss is not None else math.nan,
        model_rate=float(metrics.get("model-rate", math.nan)),
    )
    return dataclasses.replace(seat.report(), **fields)  # type: ignore[arg-type]
