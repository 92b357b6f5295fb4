"""Several devices in one worker call: split on the way in, packed on the way out.

When a simulated round has more devices than workers, the server sends one
message per worker call naming several devices (FedScale's executors,
pfl-research's many clients per process): the global model crosses the wire
once per call instead of once per device. `group_mod` turns such a message
into one message per device - the same content, each with its own
single-device task - and calls the app once for each, in device order, so
every device's training, metering and report are exactly those of a call of
its own. The replies go back as one, each device's records under
"<device index>:<name>"; a device whose call raised gets a
"<index>:fedbench-error" record instead, so one crash does not take its
group down.

While the calls run, `current_group()` lists the group's messages, so a
handler may prepare all the devices at once (fedbench's own handler batches
their training, fedbench.train.batched).
"""

from __future__ import annotations

import copy
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp.typing import ClientAppCallable

from fedbench.experiment.codec import EXPERIMENT_KEY
from fedbench.protocol import ERROR, TASK, TrainTask, group_key, tasks_from, tasks_record

_GROUP: ContextVar[tuple[Message, ...]] = ContextVar("fedbench_group", default=())


def current_group() -> tuple[Message, ...]:
    """The single-device messages of the group being handled (empty outside a group)."""
    return _GROUP.get()


@contextmanager
def _grouped(messages: Sequence[Message]) -> Iterator[None]:
    token = _GROUP.set(tuple(messages))
    try:
        yield
    finally:
        _GROUP.reset(token)


def group_mod(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    record = msg.content.config_records.get(TASK)
    if record is None:
        return call_next(msg, context)
    tasks = tasks_from(record)
    if len(tasks) == 1:
        return call_next(msg, context)
    experiment_json = str(record[EXPERIMENT_KEY])
    singles = [_single(msg, task, experiment_json) for task in tasks]
    packed = RecordDict()
    with _grouped(singles):
        for task, single in zip(tasks, singles, strict=True):
            try:
                reply = call_next(single, context)
            except Exception as exc:  # noqa: BLE001 - one device's crash is that device's reply
                traceback.print_exc()
                reason = ConfigRecord({"reason": f"{type(exc).__name__}: {exc}"})
                packed[group_key(task.device_index, ERROR)] = reason
                continue
            for name, item in reply.content.items():
                packed[group_key(task.device_index, name)] = item
    return Message(packed, reply_to=msg)


def _single(msg: Message, task: TrainTask, experiment_json: str) -> Message:
    """The group's message as one device's own: the same content, a one-device task."""
    content = RecordDict({k: v for k, v in msg.content.items() if k != TASK})
    content[TASK] = tasks_record([task], experiment_json)
    # Flower's own way to rebuild a message: the same metadata, so the app replies as
    # to the message it was sent (its reply is packed into the group's reply).
    return Message(metadata=copy.copy(msg.metadata), content=content)  # type: ignore[call-overload]
