"""Injected device faults as a Flower client mod (`fleet.faults`, fedbench.devices.faults).

It sits outside the device mod, so it sees the message as the server sent
it and the reply with its RoundReport, and applies the fault drawn for
(seed, round, device):

- `dropout`: the device leaves before training; the reply says `dropped`
  and nothing runs;
- `slowdown`: the round's compute took `slowdown_factor` times longer;
- `crash`: the ClientApp raises after training (Flower sends an error reply);
- `network_loss`: training happened (its energy is spent) but the upload is lost;
- `nan_update` / `bad_update`: the update carries NaN / a wrongly shaped
  tensor, which the server must keep out of the average.
"""

from __future__ import annotations

import dataclasses

import torch
from flwr.app import ArrayRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp.typing import ClientAppCallable

from fedbench.client.seat import seat_of
from fedbench.core.records import RoundReport, from_record, to_record
from fedbench.devices.faults import Fault, InjectedCrash, draw
from fedbench.protocol import CONTEXT_PREFIX, REPORT


class FaultMod:
    def __call__(self, msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
        if msg.metadata.message_type.split(".")[0] != MessageType.TRAIN:
            return call_next(msg, context)
        seat = seat_of(msg, context)
        if seat is None:
            return call_next(msg, context)
        models = seat.experiment.fleet.fault_models()
        fault = draw(
            models, seat.device.profile, seat.experiment.seed, seat.task.round, seat.device.index
        )
        if fault.kind == "dropout":
            report = seat.report("dropped", "injected fault: dropout before training")
            return Message(RecordDict({REPORT: to_record(report)}), reply_to=msg)
        reply = call_next(msg, context)
        if REPORT not in reply.content.config_records:
            return reply
        sent = reply.content.config_records[REPORT]
        report, arrays = inject(fault, from_record(sent), _arrays(reply))
        record = to_record(report)
        for key in set(sent) - set(record):  # what the device mod adds besides the report
            record[key] = sent[key]
        reply.content[REPORT] = record
        for key in _update_keys(reply):  # the device's carried context state stays
            del reply.content[key]
        if arrays is not None:
            reply.content[arrays[0]] = arrays[1]
        return reply


fault_mod = FaultMod()


def _update_keys(reply: Message) -> list[str]:
    """The reply's ArrayRecords but those of the device's context state (CONTEXT_PREFIX)."""
    return [k for k in reply.content.array_records if not k.startswith(CONTEXT_PREFIX)]


def _arrays(reply: Message) -> tuple[str, ArrayRecord] | None:
    keys = _update_keys(reply)
    return (keys[0], reply.content.array_records[keys[0]]) if keys else None


def inject(
    fault: Fault, report: RoundReport, arrays: tuple[str, ArrayRecord] | None
) -> tuple[RoundReport, tuple[str, ArrayRecord] | None]:
    """Apply this round's fault to a finished training."""
    if fault.slowdown > 1.0 and report.status == "ok":
        f = fault.slowdown
        extra = report.latency_s * (f - 1.0)
        report = dataclasses.replace(
            report,
            latency_s=report.latency_s * f,
            energy_j=report.energy_j * f,
            round_trip_s=report.round_trip_s + extra,
            end_s=report.end_s + extra,
            reason=f"injected fault: {f:g}x slowdown",
        )
    if arrays is None or not fault.kind:
        return report, arrays
    if fault.kind == "crash":
        raise InjectedCrash(f"injected fault: {report.device} crashed during training")
    if fault.kind == "network_loss":
        return report.with_status("dropped", "injected fault: upload lost"), None
    key, record = arrays
    state = record.to_torch_state_dict()
    name = next(k for k, v in state.items() if v.is_floating_point())
    if fault.kind == "nan_update":
        state[name] = torch.full_like(state[name], float("nan"))
    else:  # bad_update: a tensor of the wrong shape
        state[name] = torch.zeros(state[name].numel() + 1)
    return report, (key, ArrayRecord(state))
