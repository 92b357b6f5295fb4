"""The RoundReport: one row per device per round, and its only spelling.

Keys are kebab-case in Flower records and snake_case in files (the CSV
columns, docs/results.md).
`to_record`/`from_record` are the one place that converts between the
dataclass and Flower's ConfigRecord; `CSV_FIELDS` is the one column list.
Nothing else in fedbench spells these keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Literal

from flwr.app import ConfigRecord

from fedbench.errors import FedbenchError

Status = Literal["ok", "oom", "dropped", "timeout", "failed"]
STATUSES: tuple[str, ...] = ("ok", "oom", "dropped", "timeout", "failed")
# unprofiled: a ClientApp running without fedbench's device mod (a stock Flower
# client): its update counts, its round trip is the server's measurement, and
# its energy, memory and temperature are unknown.
Kind = Literal["emulated", "physical", "host", "unprofiled"]
UNPROFILED = "unprofiled"
# What a row's cost figures rest on (the meter says; docs/results.md `cost_basis`):
# the emulated roofline of the aten ops the call ran, the call's measured CPU time
# scaled to the profile (a call that ran no torch, e.g. scikit-learn), both (a torch
# call with heavy work outside torch), a physical device's probe, the host's clock.
CostBasis = Literal["ops", "cpu_time", "ops+cpu_time", "probe", "host"]
COST_BASES: tuple[str, ...] = ("ops", "cpu_time", "ops+cpu_time", "probe", "host")


@dataclass(frozen=True)
class RoundReport:
    """What one device's participation in one round cost and produced.

    Figures a meter cannot produce are NaN (files show them empty), never 0:
    a missing power rail is not a device that used no energy.
    """

    round: int
    day: int
    node: int
    device: str
    profile: str
    kind: str
    status: str
    num_examples: int = 0
    train_loss: float = math.nan
    latency_s: float = math.nan  # compute time of local training (virtual when emulated)
    comm_s: float = math.nan  # model download + upload time
    round_trip_s: float = math.nan  # latency_s + comm_s (+ queueing)
    start_s: float = math.nan  # virtual time the device got the model (run clock)
    end_s: float = math.nan  # virtual time its reply arrived: start_s + round_trip_s
    energy_j: float = math.nan  # of local training (compute)
    comm_energy_j: float = math.nan  # of the radio for comm_s (fleet.population only)
    avg_power_w: float = math.nan
    peak_mem_mb: float = math.nan
    mem_budget_mb: float = math.nan
    plan: str = ""
    cost_basis: str = ""  # what the cost figures rest on (COST_BASES; empty: nothing costed)
    # Predicted peak of the full batch when the memory planner ran a reduced plan
    # (NaN: the plan is the full batch, the planner is off, or a user's app trained).
    plan_needed_mb: float = math.nan
    temp_c_start: float = math.nan
    temp_c_end: float = math.nan
    freq_ghz_avg: float = math.nan
    throttled_frac: float = math.nan
    battery_pct_start: float = math.nan  # battery level the round started at
    battery_pct: float = math.nan  # battery level after the round (training + radio)
    model_version: int = -1  # the global model version it trained on (0: the initial one)
    staleness: int = 0  # versions applied between that one and the aggregation that used it
    model_rate: float = math.nan  # width rate of the submodel it trained (algorithm=heterofl...)
    host_wall_s: float = math.nan  # real seconds on the machine that ran the client
    worker: str = ""  # where it ran: host:pid (@Ray node), empty if unknown
    reason: str = ""  # why a status is not ok (exception text, fault name, ...)

    def with_status(self, status: str, reason: str) -> RoundReport:
        return replace(self, status=status, reason=reason)


CSV_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RoundReport))
_TYPES = {f.name: f.type for f in fields(RoundReport)}


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def to_record(report: RoundReport) -> ConfigRecord:
    """Serialise a report for a Flower reply."""
    record = ConfigRecord()
    for name in CSV_FIELDS:
        record[_kebab(name)] = getattr(report, name)
    return record


def from_record(record: ConfigRecord, *, node: int | None = None) -> RoundReport:
    """Parse a report from a Flower reply; a malformed one raises FedbenchError.

    `node` overrides the node id the client claims: the server trusts the
    transport's source id, not the payload.
    """
    values: dict[str, object] = {}
    for name in CSV_FIELDS:
        key = _kebab(name)
        if key not in record:
            raise FedbenchError(f"malformed client reply: report has no key '{key}'")
        value = record[key]
        expected = _TYPES[name]
        try:
            if expected == "int":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError
                values[name] = int(value)
            elif expected == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError
                values[name] = float(value)
            else:
                if not isinstance(value, str):
                    raise TypeError
                values[name] = value
        except TypeError:
            raise FedbenchError(
                f"malformed client reply: report key '{key}' is {type(value).__name__}, "
                f"expected {expected}"
            ) from None
    if values["status"] not in STATUSES:
        raise FedbenchError(
            f"malformed client reply: status '{values['status']}' is not one of "
            f"{', '.join(STATUSES)}"
        )
    if values["cost_basis"] not in ("", *COST_BASES):
        raise FedbenchError(
            f"malformed client reply: cost basis '{str(values['cost_basis'])[:40]}' is not "
            f"one of {', '.join(COST_BASES)} (or empty)"
        )
    if node is not None:
        values["node"] = node
    return RoundReport(**values)  # type: ignore[arg-type]


def to_row(report: RoundReport) -> dict[str, object]:
    """A CSV row: snake_case keys, NaN as an empty cell."""
    row: dict[str, object] = {}
    for name in CSV_FIELDS:
        value = getattr(report, name)
        row[name] = "" if isinstance(value, float) and math.isnan(value) else value
    return row


@dataclass(frozen=True)
class ClientMetric:
    """One number a device's ClientApp put in a reply: a row of client_metrics.csv.

    Every metric of a train reply and of an evaluate reply, as the app named
    it (fedbench.protocol.reply_metrics reads them), so nothing the app
    measured is lost beyond the few rounds.csv has columns for.
    """

    round: int
    day: int
    device: str
    message: str  # "train" or "evaluate": the reply it came in
    record: str  # the record's name in the reply ("metrics"; a legacy app's "fitres.metrics")
    key: str  # the metric's name, list elements as "name[i]"
    value: float  # as the app sent it (an int stays an int; nan and inf as they came)


METRIC_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ClientMetric))
