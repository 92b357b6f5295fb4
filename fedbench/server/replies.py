"""Every reply of a round, read into a RoundReport and (at most) one clean update.

A reply is data, never a crash: no reply, an error reply, a malformed
report, a report for another device, an update that does not fit the
global model - each becomes a report with a status and a reason. A reply
that carries an update but no RoundReport comes from a ClientApp without
fedbench's device mod: an **unprofiled** device. Its update counts, its
round trip is what the server measured between sending and receiving, and
its energy, memory and temperature stay unknown (empty, never 0).

An accepted update is rebuilt as exactly one ArrayRecord (under the key the
Flower strategy reads, in the global model's dtypes) and one MetricRecord
with `num-examples`: nothing else a client put in its reply reaches the
aggregation, and what was left out is named in the row's `reason`. The
checks of fedbench.server.defense decide what is believed: cost figures
outside physical bounds are blanked, num-examples is bounded by what the
device holds, and an update far from the round's others is refused.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fedbench.arrays import DecodedArray, decode
from fedbench.core.device import DeviceSpec, DeviceState
from fedbench.core.records import UNPROFILED, RoundReport, from_record
from fedbench.errors import FedbenchError
from fedbench.protocol import (
    ERROR,
    LOSS_KEYS,
    METRICS,
    NODE_NAME,
    NUM_EXAMPLES,
    REPORT,
    STATE,
    UNREAD,
    reply_metrics,
    state_from,
    ungroup_all,
)
from fedbench.server.defense import Defense, check_costs, distance, distance_outliers

T = TypeVar("T")
REFUSED = "refused: "  # what the defense refuses, as a reason begins


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
    unread: tuple[str, ...] = ()  # train config keys a client half needs, never read
    content: RecordDict | None = None  # the device's reply as its ClientApp wrote it
    # Every number its ClientApp returned, as (record, key, value): client_metrics.csv
    # (fedbench.protocol.reply_metrics), whatever the reply's status.
    metrics: tuple[tuple[str, str, float], ...] = ()

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
    defense: Defense | None = None,
    as_is: bool = False,
) -> list[Reply]:
    """One Reply per sent message, in device order.

    `as_is`: a user app's own strategy reads the replies (fedbench.server.app_loop), so a
    reply that is not in the Message API's update shape (SecAgg+'s masked vectors, a
    legacy FitRes) is accepted with its costs and its update unchecked; a claim the
    defense refuses (a false example count) is still refused.
    """
    by_id = {r.metadata.reply_to_message_id: r for r in replies}
    received_at = received_at or {}
    defense = defense or Defense()
    shared = Counter(s.message.metadata.message_id for s in sent)
    split: dict[str, dict[int, RecordDict]] = {}  # a grouped reply, split once
    out = []
    for s in sent:
        msg_id = s.message.metadata.message_id
        msg = by_id.get(msg_id)
        if msg is not None and shared[msg_id] > 1 and not msg.has_error() and msg_id not in split:
            split[msg_id] = ungroup_all(msg.content)
        content, error = _view(msg, s.device.index, split.get(msg_id))
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
        reply = _read(s, base, content, error, global_arrays, arrays_key, arrived, defense, as_is)
        metrics = reply_metrics(content) if content is not None else ()
        out.append(replace(reply, metrics=metrics))
    return sorted(_refuse_outliers(out, global_arrays, defense), key=lambda r: r.device.name)


def _refuse_outliers(replies: list[Reply], reference: ArrayRecord, defense: Defense) -> list[Reply]:
    """Updates too far from the model they were sent, compared with the round's others, refused."""
    updates = {r.device.name: r for r in replies if r.update is not None}
    if defense.config.max_norm_ratio is None or len(updates) < 2:
        return replies
    values = {key: decode(array) for key, array in reference.items()}
    sent: dict[int, dict[str, np.ndarray]] = {}  # a submodel's own slice, decoded once

    def reference_of(r: Reply) -> Mapping[str, np.ndarray]:
        mine = _sent_arrays(r.instruction)
        if mine is None or mine is reference:
            return values
        key = id(mine)
        if key not in sent:
            sent[key] = {k: decode(a) for k, a in mine.items()}
        return sent[key]

    # Each update is compared with the round's updates of the same model: per-device
    # submodels (HeteroFL, FjORD, FedRolex) return slices of different sizes, and no
    # norm compares them (the L2 norm refused an honest rate-1 Raspberry Pi 4 among
    # FjORD's smaller slices; a per-parameter RMS refused a 1/16 slice, whose weights
    # move more). The server chose what it sent, so a device cannot pick its group; a
    # device alone at its width is left to the other checks.
    groups: dict[tuple[tuple[str, tuple[int, ...]], ...], dict[str, float]] = {}
    for n, r in updates.items():
        ref = reference_of(r)
        shapes = tuple((k, tuple(v.shape)) for k, v in ref.items())
        groups.setdefault(shapes, {})[n] = distance(_arrays_of(r), ref)
    far: dict[str, str] = {}
    for distances in groups.values():
        far.update(distance_outliers(distances, defense.config.max_norm_ratio))
    return [
        replace(r, report=r.report.with_status("failed", far[r.device.name]), update=None)
        if r.device.name in far
        else r
        for r in replies
    ]


def _sent_arrays(message: Message, arrays_key: str | None = None) -> ArrayRecord | None:
    """The model a train message carried (None: none, e.g. a test's bare message)."""
    records = message.content.array_records
    if arrays_key is not None and arrays_key in records:
        return records[arrays_key]
    return next(iter(records.values()), None) if len(records) == 1 else None


def _arrays_of(reply: Reply) -> ArrayRecord:
    assert reply.update is not None
    return next(iter(reply.update.array_records.values()))


def _view(
    msg: Message | None, device_index: int, grouped: Mapping[int, RecordDict] | None
) -> tuple[RecordDict | None, str | None]:
    """(the device's reply content, or why its call failed); (None, None): no reply.

    A reply for several devices (fedbench.client.group) holds each device's
    records under its index (`grouped`: that reply split by device); an error
    of the whole call is every device's.
    """
    if msg is None:
        return None, None
    if msg.has_error():
        return None, condense_error(str(msg.error.reason))
    if grouped is None:
        return msg.content, None
    content = grouped.get(device_index, RecordDict())
    configs = content.config_records
    if ERROR in configs:
        return None, str(configs[ERROR].get("reason", "the device's call failed"))
    return (content, None) if len(content) else (None, None)


def _read(
    s: Sent,
    base: RoundReport,
    content: RecordDict | None,
    error: str | None,
    global_arrays: ArrayRecord,
    arrays_key: str,
    arrived: float,
    defense: Defense,
    as_is: bool = False,
) -> Reply:
    def refuse(status: str, reason: str, report: RoundReport = base) -> Reply:
        return Reply(s.device, report.with_status(status, reason[:500]), None, None, s.message)

    if error is not None or content is None:
        return refuse("failed", condense_error(error or "no content"))
    state = None
    configs = content.config_records  # Flower builds this view anew on every access
    if REPORT in configs:
        try:
            report = from_record(configs[REPORT], node=base.node)
            if STATE in configs:
                state = state_from(configs[STATE])
        except (FedbenchError, KeyError, TypeError, ValueError) as exc:
            return refuse("failed", f"malformed reply: {exc}")
        if report.device != s.device.name:
            return refuse(
                "failed", f"reply names device {report.device!r}, expected {s.device.name!r}"
            )
        impostor = defense.wrong_name(s.device.name, configs[REPORT].get(NODE_NAME))
        if impostor:
            return refuse("failed", impostor)
        report = replace(report, start_s=s.start_s, model_version=s.model_version)
        report = replace(report, end_s=s.start_s + report.round_trip_s)
    else:
        report = _unprofiled(base, content, s.sent_at, arrived)
    report, lies = check_costs(report, defense.bounds_of(s.device.profile))
    if lies:
        why = "cost report refused: " + "; ".join(lies)
        if math.isnan(report.round_trip_s):  # cannot be placed on the clock
            return refuse("failed", why, report)
        report = replace(report, reason=_join(report.reason, why))
    if report.status != "ok":
        return Reply(s.device, report, None, state, s.message)
    # Checked against what the device was sent: the global model, or its submodel's slice
    # (algorithm=heterofl, fjord, fedrolex: fedbench.algorithms.submodels).
    reference = _sent_arrays(s.message, arrays_key) or global_arrays
    update, problem = _update(content, reference, arrays_key, defense.examples_bound(s.device.name))
    if update is None and as_is and not problem.startswith(REFUSED):
        report = replace(report, reason=_join(report.reason, f"update not checked: {problem}"))
        return Reply(s.device, report, None, state, s.message, _unread(configs), content)
    if update is None:
        return Reply(
            s.device,
            report.with_status("failed", _join(problem, report.reason)),
            None,
            state,
            s.message,
        )
    if problem:  # what was left out of the update
        report = replace(report, reason=_join(report.reason, problem))
    return Reply(s.device, report, update, state, s.message, _unread(configs), content)


def _unread(configs: Mapping[str, ConfigRecord]) -> tuple[str, ...]:
    """The keys the device mod says the app never read (a few short names at most)."""
    keys = configs[UNREAD].get("keys", []) if UNREAD in configs else []
    if not isinstance(keys, list):
        return ()
    return tuple(str(k)[:64] for k in keys[:8])


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)[:500]


def _unprofiled(
    base: RoundReport, content: RecordDict, sent_at: float, arrived: float
) -> RoundReport:
    """A reply from a ClientApp without the device mod: the server's own measurements."""
    metrics = _metrics(content.metric_records)
    round_trip = max(0.0, arrived - sent_at)
    loss = next((float(metrics[k]) for k in LOSS_KEYS if k in metrics), math.nan)
    return replace(
        base,
        kind=UNPROFILED,
        num_examples=_count(metrics.get(NUM_EXAMPLES, 0.0)),
        train_loss=loss,
        round_trip_s=round_trip,
        end_s=base.start_s + round_trip,
    )


def _count(value: float) -> int:
    """A claimed example count as a row shows it (the update's own check refuses lies)."""
    return int(value) if math.isfinite(value) and abs(value) < 2**63 else 0


def _metrics(records: Mapping[str, MetricRecord]) -> dict[str, float]:
    record = _named(records, METRICS)
    if record is None:
        return {}
    return {
        k: float(v)
        for k, v in record.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _named(records: Mapping[str, T], key: str) -> T | None:
    """The record under `key`, else the only one (a stock app may name it otherwise)."""
    if key in records:
        return records[key]
    return next(iter(records.values())) if len(records) == 1 else None


def _update(
    content: RecordDict, global_arrays: ArrayRecord, arrays_key: str, max_examples: int
) -> tuple[RecordDict | None, str]:
    """(the clean update, what was left out) or (None, why it cannot be aggregated)."""
    records = content.array_records
    metric_records = content.metric_records
    arrays = _named(records, arrays_key)
    if arrays is None:
        return None, (
            f"malformed reply: {len(records)} ArrayRecords {sorted(records)[:4]}, "
            f"none named '{arrays_key}'"
        )
    if len(metric_records) > 1 and METRICS not in metric_records:
        return None, (
            f"malformed reply: {len(metric_records)} MetricRecords, none named '{METRICS}'"
        )
    claimed = _metrics(metric_records)
    n = claimed.get(NUM_EXAMPLES)
    if n is None:
        return None, f"malformed reply: no '{NUM_EXAMPLES}' metric"
    if not (n >= 1 and float(n).is_integer()):
        return None, f"{REFUSED}'{NUM_EXAMPLES}'={n!r} is not a positive integer"
    if n > max_examples:
        return None, (
            f"{REFUSED}'{NUM_EXAMPLES}'={n:g} exceeds the {max_examples} examples this device holds"
        )
    clean_arrays, problem = conform(arrays, global_arrays)
    if clean_arrays is None:
        return None, problem
    metrics: dict[str, int | float | list[int] | list[float]] = {
        k: v for k, v in claimed.items() if math.isfinite(v)
    }
    metrics[NUM_EXAMPLES] = int(n)
    left_out = sorted(set(records) - {arrays_key} if arrays_key in records else [])
    left_out += sorted(set(metric_records) - {METRICS})
    left_out += sorted(content.config_records.keys() - {REPORT, STATE, UNREAD})
    note = f"ignored extra record(s) {left_out[:5]}" if left_out else ""
    return RecordDict({arrays_key: clean_arrays, METRICS: MetricRecord(metrics)}), note


def conform(arrays: ArrayRecord, reference: ArrayRecord) -> tuple[ArrayRecord | None, str]:
    """The update in the global model's dtypes, or None and why it must not be averaged in.

    Every array is read once (fedbench.arrays.decode) and handed on
    with its values, so the aggregation does not parse it again. Floating-point
    arrays of another width are cast (a float64 update must not promote the
    global model); integers where the model holds floats, or floats where it
    holds integers, are refused.
    """
    if set(reference.keys()) != set(arrays.keys()):
        extra = sorted(set(arrays.keys()) - set(reference.keys()))[:3]
        missing = sorted(set(reference.keys()) - set(arrays.keys()))[:3]
        return None, f"update keys differ from the global model (extra {extra}, missing {missing})"
    out = ArrayRecord()
    for key in list(reference):  # the global model's order
        array = arrays[key]
        expected = tuple(reference[key].shape)
        try:
            values = decode(array)
        except ValueError as exc:
            return None, f"update '{key}' cannot be read: {exc}"
        if tuple(values.shape) != expected:
            return None, f"update '{key}' has shape {tuple(values.shape)}, expected {expected}"
        want = np.dtype(reference[key].dtype)  # the global model: ours, its header trusted
        if values.dtype == want:
            if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
                return None, f"update has NaN/Inf in '{key}'"
            out[key] = DecodedArray.of(array, values)
            continue
        if values.dtype.kind != want.kind and {values.dtype.kind, want.kind} != {"i", "u"}:
            return None, f"{REFUSED}update '{key}' is {values.dtype}, the global model's is {want}"
        with np.errstate(over="ignore", invalid="ignore"):
            values = values.astype(want)
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            return None, f"{REFUSED}update has NaN/Inf in '{key}' (as {want})"
        out[key] = Array(np.array(values, order="C"))  # keeps 0-d arrays 0-d
    return out, ""


def keep_dtypes(aggregated: ArrayRecord, previous: ArrayRecord) -> ArrayRecord:
    """The aggregate in the global model's dtypes.

    Flower's weighted averages return float64 for integer arrays (a
    BatchNorm counter): cast back, rounding integers, so the global model
    never changes type and the next round's updates still match it.
    """
    out: dict[str, Array] = {}
    for key, array in aggregated.items():
        values = array.numpy()
        want = previous[key].numpy().dtype if key in previous else values.dtype
        if values.dtype != want:
            values = (np.rint(values) if want.kind in "iu" else values).astype(want)
        out[key] = Array(np.array(values, order="C"))
    return ArrayRecord(out)


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
