"""Every reply of a round, read into a RoundReport and (at most) one clean update.

A reply is data, never a crash: no reply, an error reply, a malformed
report, a report for another device, an update that does not fit the
global model - each becomes a report with a status and a reason. A reply
that carries an update but no RoundReport comes from a ClientApp without
fedbench's device mod: an **unprofiled** device. Its update counts, its
round trip is what the server measured between sending and receiving, and
its energy, memory and temperature stay unknown (empty, never 0).

An accepted update is rebuilt as exactly one ArrayRecord (under the key the
Flower strategy reads) and one MetricRecord: nothing else a client put in
its reply reaches the aggregation.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

from fedbench.devices.meter import DeviceState
from fedbench.errors import FedbenchError
from fedbench.fleet import DeviceSpec
from fedbench.protocol import (
    ERROR,
    LOSS_KEYS,
    METRICS,
    NUM_EXAMPLES,
    REPORT,
    STATE,
    state_from,
    ungroup,
)
from fedbench.report.records import UNPROFILED, RoundReport, from_record
from fedbench.server.arrays import DecodedArray, decode


@dataclass(frozen=True)
class Sent:
    """One train message of the round, and whom it was for."""

    device: DeviceSpec
    message: Message  # as pushed (its metadata carries the message id)
    kind: str  # the meter kind the server expects (emulated, physical, host)
    start_s: float  # virtual time the device starts
    model_version: int
    sent_at: float  # host wall clock when it was pushed


@dataclass(frozen=True)
class Reply:
    device: DeviceSpec
    report: RoundReport
    update: RecordDict | None  # one ArrayRecord + one MetricRecord, or None
    state: DeviceState | None  # the device's emulated state after the round
    instruction: Message

    def as_message(self) -> Message:
        """The clean update as a reply to its instruction (what a Flower strategy aggregates)."""
        assert self.update is not None
        return Message(self.update, reply_to=self.instruction)


def read_replies(
    round_: int,
    day: int,
    sent: Sequence[Sent],
    replies: Iterable[Message],
    global_arrays: ArrayRecord,
    arrays_key: str,
    received_at: Mapping[str, float] | None = None,
) -> list[Reply]:
    """One Reply per sent message, in device order."""
    by_id = {r.metadata.reply_to_message_id: r for r in replies}
    received_at = received_at or {}
    shared = Counter(s.message.metadata.message_id for s in sent)
    out = []
    for s in sent:
        msg = by_id.get(s.message.metadata.message_id)
        content, error = _view(
            msg, s.device.index, grouped=shared[s.message.metadata.message_id] > 1
        )
        base = RoundReport(
            round=round_,
            day=day,
            node=s.message.metadata.dst_node_id,
            device=s.device.name,
            profile=s.device.profile,
            kind=s.kind,
            status="ok",
            start_s=s.start_s,
            model_version=s.model_version,
        )
        if content is None and error is None:
            out.append(
                Reply(s.device, base.with_status("dropped", "no reply"), None, None, s.message)
            )
            continue
        arrived = received_at.get(s.message.metadata.message_id, time.time())
        out.append(_read(s, base, content, error, global_arrays, arrays_key, arrived))
    return sorted(out, key=lambda r: r.device.name)


def _view(
    msg: Message | None, device_index: int, grouped: bool
) -> tuple[RecordDict | None, str | None]:
    """(the device's reply content, or why its call failed); (None, None): no reply.

    A reply for several devices (fedbench.client.group) holds each device's
    records under its index; an error of the whole call is every device's.
    """
    if msg is None:
        return None, None
    if msg.has_error():
        return None, condense_error(str(msg.error.reason))
    if not grouped:
        return msg.content, None
    content = ungroup(msg.content, device_index)
    if ERROR in content.config_records:
        return None, str(content.config_records[ERROR].get("reason", "the device's call failed"))
    return (content, None) if len(content) else (None, None)


def _read(
    s: Sent,
    base: RoundReport,
    content: RecordDict | None,
    error: str | None,
    global_arrays: ArrayRecord,
    arrays_key: str,
    arrived: float,
) -> Reply:
    def refuse(status: str, reason: str, report: RoundReport = base) -> Reply:
        return Reply(s.device, report.with_status(status, reason[:500]), None, None, s.message)

    if error is not None or content is None:
        return refuse("failed", condense_error(error or "no content"))
    state = None
    if REPORT in content.config_records:
        try:
            report = from_record(content.config_records[REPORT], node=base.node)
            if STATE in content.config_records:
                state = state_from(content.config_records[STATE])
        except (FedbenchError, KeyError, TypeError, ValueError) as exc:
            return refuse("failed", f"malformed reply: {exc}")
        if report.device != s.device.name:
            return refuse(
                "failed", f"reply names device {report.device!r}, expected {s.device.name!r}"
            )
        report = replace(report, start_s=s.start_s, model_version=s.model_version)
        report = replace(report, end_s=s.start_s + report.round_trip_s)
    else:
        report = _unprofiled(base, content, s.sent_at, arrived)
    if report.status != "ok":
        return Reply(s.device, report, None, state, s.message)
    update, problem = _update(content, global_arrays, arrays_key)
    if update is None:
        return Reply(s.device, report.with_status("failed", problem[:500]), None, state, s.message)
    return Reply(s.device, report, update, state, s.message)


def _unprofiled(
    base: RoundReport, content: RecordDict, sent_at: float, arrived: float
) -> RoundReport:
    """A reply from a ClientApp without the device mod: the server's own measurements."""
    metrics = _metrics(content)
    round_trip = max(0.0, arrived - sent_at)
    loss = next((float(metrics[k]) for k in LOSS_KEYS if k in metrics), math.nan)
    return replace(
        base,
        kind=UNPROFILED,
        num_examples=int(metrics.get(NUM_EXAMPLES, 0)),
        train_loss=loss,
        round_trip_s=round_trip,
        end_s=base.start_s + round_trip,
    )


def _metrics(content: RecordDict) -> dict[str, float]:
    records = content.metric_records
    record = records.get(METRICS) or next(iter(records.values()), None)
    if record is None:
        return {}
    return {k: float(v) for k, v in record.items() if isinstance(v, (int, float))}


def _update(
    content: RecordDict, global_arrays: ArrayRecord, arrays_key: str
) -> tuple[RecordDict | None, str]:
    """(the clean update, "") or (None, why it cannot be aggregated)."""
    arrays = list(content.array_records.values())
    if len(arrays) != 1:
        return None, f"malformed reply: {len(arrays)} ArrayRecords, expected 1"
    metrics = _metrics(content)
    n = metrics.get(NUM_EXAMPLES)
    if n is None:
        return None, f"malformed reply: no '{NUM_EXAMPLES}' metric"
    if not (n >= 1 and float(n).is_integer()):
        return None, f"malformed reply: '{NUM_EXAMPLES}'={n!r} is not a positive integer"
    checked, problem = checked_update(arrays[0], global_arrays)
    if checked is None:
        return None, problem
    clean: dict[str, int | float | list[int] | list[float]] = {
        k: v for k, v in metrics.items() if math.isfinite(v)
    }
    clean[NUM_EXAMPLES] = int(n)
    return RecordDict({arrays_key: checked, METRICS: MetricRecord(clean)}), ""


def checked_update(arrays: ArrayRecord, reference: ArrayRecord) -> tuple[ArrayRecord | None, str]:
    """The update with every array read once, or (None, why it must not be averaged in)."""
    if set(reference.keys()) != set(arrays.keys()):
        extra = sorted(set(arrays.keys()) - set(reference.keys()))[:3]
        missing = sorted(set(reference.keys()) - set(arrays.keys()))[:3]
        return None, f"update keys differ from the global model (extra {extra}, missing {missing})"
    out = ArrayRecord()
    for key in reference:
        array = arrays[key]
        expected = tuple(reference[key].shape)
        try:
            values = decode(array)
        except ValueError as exc:
            return None, f"update '{key}' cannot be read: {exc}"
        if tuple(values.shape) != expected:
            return None, f"update '{key}' has shape {tuple(values.shape)}, expected {expected}"
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            return None, f"update has NaN/Inf in '{key}'"
        out[key] = DecodedArray.of(array, values)
    return out, ""


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Crash|Interrupt|Exit)): (.+)$")


def condense_error(reason: str, limit: int = 300) -> str:
    """One line from a remote traceback: its last `SomeError: message` line.

    Flower's error replies carry the whole (Ray) traceback; the records keep
    the exception that ended the ClientApp, which is what a user acts on.
    """
    reason = re.sub(r"\x1b\[[0-9;]*m", "", reason)
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    for line in reversed(lines):
        match = _EXCEPTION_LINE.match(line)
        if match:
            return f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(3)}"[:limit]
    return " ".join(lines)[:limit]
