"""What crosses the wire between fedbench's server and its device mod, spelled once.

A train message from fedbench is whatever the Flower strategy (`algorithm=`)
built - `arrays` and `config`, which the ClientApp reads as usual - plus one
ConfigRecord, `fedbench`, that says which fleet device trains (`TrainTask`)
and carries the experiment. The device mod takes that record out before the
ClientApp sees the message and puts the RoundReport (`fedbench-report`),
the device's emulated state (`fedbench-state`) and the algorithm's keys the
app never read (`fedbench-unread`) into the reply. A reply
without them comes from a ClientApp that runs without the mod: an
unprofiled device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fedbench.core.device import DeviceState, Traits
from fedbench.errors import FedbenchError
from fedbench.experiment.codec import EXPERIMENT_KEY

TASK = "fedbench"  # the ConfigRecord fedbench adds to a train (or evaluate) message
REPORT = "fedbench-report"  # the RoundReport in a reply (fedbench.report.records)
STATE = "fedbench-state"  # the device's emulated state after the round
ERROR = "fedbench-error"  # why one device of a several-device call produced no reply
# In a reply: the train config keys a client half needs that the ClientApp never read
# (fedbench.client.reads), as {"keys": [...]}.
UNREAD = "fedbench-unread"
# A user app's per-device `context.state`, carried with the device's messages and
# replies as records "fedbench-context/<name>" (fedbench.client.mod, fedbench.server.app_loop).
CONTEXT_PREFIX = "fedbench-context/"
# A reply for several devices holds each device's records as "<device index>:<name>".
GROUP_SEPARATOR = ":"
ARRAYS = "arrays"  # Flower's default ArrayRecord key (FedAvg's arrayrecord_key)
METRICS = "metrics"  # the MetricRecord of a reply (Flower's convention)
NUM_EXAMPLES = "num-examples"  # the key Flower's strategies weight by
# In a reply's report: the name a physical device announced (`name=`); the
# server refuses it unless it is the name its registered key was issued for.
NODE_NAME = "node-name"
# Metric keys a ClientApp may report its training loss under (fedbench's own:
# train_loss; Flower's quickstarts: train_loss).
LOSS_KEYS: tuple[str, ...] = ("train_loss", "train-loss", "loss")
# The ConfigRecord a legacy Flower client's FitRes/EvaluateRes metrics travel in
# ("fitres.metrics", "evaluateres.metrics": flwr.compat's recorddict_compat).
LEGACY_METRICS_SUFFIX = ".metrics"
# At most this many numbers of one reply are kept (client_metrics.csv), names cut to
# MAX_METRIC_NAME characters: a reply cannot grow the run folder without bound.
MAX_METRICS = 64
MAX_METRIC_NAME = 64


@dataclass(frozen=True)
class TrainTask:
    """One device's job in one round, as the server hands it to the device mod."""

    round: int
    day: int
    device_index: int
    device: str  # the device's name in the fleet (checked against the index)
    now_s: float  # virtual time at which the device starts
    model_version: int  # the global model version sent (aggregations so far)
    state: DeviceState | None  # last emulated state (None: the device's first round)
    traits: Traits | None = None  # the device's own draw (fleet.population), if any


# The Traits of the devices of a message, one list each (kebab-case keys).
_TRAITS = {
    "speed": "speed",
    "down_mbps": "down-mbps",
    "up_mbps": "up-mbps",
    "rtt_ms": "rtt-ms",
    "capacity_wh": "capacity-wh",
    "cellular": "cellular",
}


def tasks_record(tasks: Sequence[TrainTask], experiment_json: str) -> ConfigRecord:
    """The `fedbench` record of a message for one device, or for several (one worker call).

    The devices of one message share the round, the clock and the model version;
    per-device fields are lists, in the order of `device-index`.
    """
    if not tasks:
        raise ValueError("a fedbench message names at least one device")
    first = tasks[0]
    states = [t.state or DeviceState(math.nan, math.nan, math.nan) for t in tasks]
    traits = [t.traits for t in tasks if t.traits is not None]
    if traits and len(traits) != len(tasks):
        raise ValueError("the devices of one message either all carry traits or none does")
    drawn = {f"trait-{key}": [getattr(t, name) for t in traits] for name, key in _TRAITS.items()}
    return ConfigRecord(
        {
            **(drawn if traits else {}),
            EXPERIMENT_KEY: experiment_json,
            "round": first.round,
            "day": first.day,
            "now-s": first.now_s,
            "model-version": first.model_version,
            "device-index": [t.device_index for t in tasks],
            "device": [t.device for t in tasks],
            "state-temp-c": [s.temp_c for s in states],
            "state-battery-pct": [s.battery_pct for s in states],
            "state-time-s": [s.time_s for s in states],
        }
    )


def tasks_from(record: ConfigRecord) -> list[TrainTask]:
    """The devices a `fedbench` record names, with their tasks."""
    try:
        indices = list(record["device-index"])  # type: ignore[arg-type]
        names = list(record["device"])  # type: ignore[arg-type]
        temps = list(record["state-temp-c"])  # type: ignore[arg-type]
        batteries = list(record["state-battery-pct"])  # type: ignore[arg-type]
        times = list(record["state-time-s"])  # type: ignore[arg-type]
        if not indices or not len(indices) == len(names) == len(temps) == len(batteries) == len(
            times
        ):
            raise ValueError("per-device lists of different lengths")
        traits = _traits_from(record, len(indices))
        tasks = []
        for k, (i, name, temp, battery, at) in enumerate(
            zip(indices, names, temps, batteries, times, strict=True)
        ):
            state = DeviceState(float(temp), float(battery), float(at))  # type: ignore[arg-type]
            tasks.append(
                TrainTask(
                    round=int(record["round"]),  # type: ignore[arg-type]
                    day=int(record["day"]),  # type: ignore[arg-type]
                    device_index=int(i),  # type: ignore[call-overload]
                    device=str(name),
                    now_s=float(record["now-s"]),  # type: ignore[arg-type]
                    model_version=int(record["model-version"]),  # type: ignore[arg-type]
                    state=None if math.isnan(state.time_s) else state,
                    traits=traits[k] if traits else None,
                )
            )
        return tasks
    except (KeyError, TypeError, ValueError) as exc:
        raise FedbenchError(f"malformed server message: bad train task ({exc})") from None


def reply_metrics(content: RecordDict) -> tuple[tuple[str, str, float], ...]:
    """Every number a ClientApp put in its reply's metrics, as (record, key, value).

    Its MetricRecords, and the ConfigRecords a legacy client's FitRes and
    EvaluateRes metrics travel in; a list is one value per element
    (`key[i]`), a bool 0 or 1; strings, bytes and fedbench's own records are
    not metrics. At most MAX_METRICS values, in the reply's order.
    """
    records: list[tuple[str, Mapping[str, object]]] = list(content.metric_records.items())
    records += [
        (name, record)
        for name, record in content.config_records.items()
        if name.endswith(LEGACY_METRICS_SUFFIX) and not name.startswith(TASK)
    ]
    out: list[tuple[str, str, float]] = []
    for name, record in records:
        for key, value in record.items():
            for element, number in _numbers(key, value):
                if len(out) == MAX_METRICS:
                    return tuple(out)
                out.append((_printable(name), _printable(element), number))
    return tuple(out)


def _numbers(key: str, value: object) -> list[tuple[str, float]]:
    """A record value's numbers: itself, or a list's elements as `key[i]`."""
    if isinstance(value, bool):
        return [(key, int(value))]
    if isinstance(value, (int, float)):
        return [(key, value)]
    if isinstance(value, list):
        return [
            (f"{key}[{i}]", int(v) if isinstance(v, bool) else v)
            for i, v in enumerate(value[:MAX_METRICS])
            if isinstance(v, (int, float))
        ]
    return []


def _printable(name: str) -> str:
    """A name as a file may hold it: control characters as '?', at most MAX_METRIC_NAME long."""
    return "".join(c if c.isprintable() else "?" for c in name[:MAX_METRIC_NAME])


def context_records(state: RecordDict) -> dict[str, object]:
    """A device's context.state as records of a message (under CONTEXT_PREFIX)."""
    return {CONTEXT_PREFIX + name: record for name, record in state.items()}


def split_context(content: RecordDict) -> tuple[RecordDict, RecordDict]:
    """(the content without the carried context state, that state)."""
    rest, state = RecordDict(), RecordDict()
    for name, record in content.items():
        if name.startswith(CONTEXT_PREFIX):
            state[name[len(CONTEXT_PREFIX) :]] = record
        else:
            rest[name] = record
    return rest, state


def group_key(device_index: int, name: str) -> str:
    """A record's name in a reply for several devices."""
    return f"{device_index}{GROUP_SEPARATOR}{name}"


def ungroup_all(content: RecordDict) -> dict[int, RecordDict]:
    """Every device's records out of a reply for several devices, in one pass.

    Records whose name carries no device index (a hostile or stock reply)
    belong to no device and are left out.
    """
    by_device: dict[int, dict[str, ArrayRecord | MetricRecord | ConfigRecord]] = {}
    for key, value in content.items():
        index, sep, name = key.partition(GROUP_SEPARATOR)
        if sep and index.isdigit():
            by_device.setdefault(int(index), {})[name] = value
    return {i: RecordDict(records) for i, records in by_device.items()}


def state_record(state: DeviceState) -> ConfigRecord:
    return ConfigRecord(
        {"temp-c": state.temp_c, "battery-pct": state.battery_pct, "time-s": state.time_s}
    )


def state_from(record: ConfigRecord, prefix: str = "") -> DeviceState | None:
    """The DeviceState in `record` (None when its time is NaN: no state)."""
    state = DeviceState(
        float(record[f"{prefix}temp-c"]),  # type: ignore[arg-type]
        float(record[f"{prefix}battery-pct"]),  # type: ignore[arg-type]
        float(record[f"{prefix}time-s"]),  # type: ignore[arg-type]
    )
    return None if math.isnan(state.time_s) else state


def _traits_from(record: ConfigRecord, n: int) -> list[Traits]:
    if "trait-speed" not in record:
        return []
    columns: dict[str, list[float]] = {}
    for name, key in _TRAITS.items():
        values = record[f"trait-{key}"]
        if not isinstance(values, list) or len(values) != n:
            raise ValueError(f"trait-{key}: expected {n} values")
        columns[name] = [float(v) for v in values]  # type: ignore[arg-type]
    return [
        Traits(
            speed=columns["speed"][k],
            down_mbps=columns["down_mbps"][k],
            up_mbps=columns["up_mbps"][k],
            rtt_ms=columns["rtt_ms"][k],
            capacity_wh=columns["capacity_wh"][k],
            cellular=bool(columns["cellular"][k]),
        )
        for k in range(n)
    ]
