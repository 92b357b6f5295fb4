"""FedAvg whose device choice is a fedbench selection strategy.

`configure_train` asks the plug-in (strategies/) which devices train and
sends each its own task; `aggregate_train` turns every reply - or its
absence - into a RoundReport, drops bad updates, and averages the rest with
Flower's FedAvg rule. Aggregation stays Flower's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from fedbench.app.protocol import ARRAYS, CONFIG, METRICS, NUM_EXAMPLES, Identity, TrainTask
from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from fedbench.report.records import RECORD_KEY, RoundReport, from_record
from strategies.base import SelectionStrategy


class FleetFedAvg(FedAvg):
    def __init__(
        self,
        selector: SelectionStrategy,
        ledger: Ledger,
        identities: dict[int, Identity],
        experiment: ConfigRecord,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(fraction_evaluate=0.0, min_available_nodes=1, min_train_nodes=1)
        self.selector = selector
        self.ledger = ledger
        self.identities = identities  # device index -> what its node said it is
        self.node_of = {i: who.node for i, who in identities.items()}  # device index -> node id
        self.experiment = experiment
        self.deadline_s = deadline_s
        self.reports: list[RoundReport] = []  # the last round's, one per picked device
        self._picked: dict[int, int] = {}  # node id -> device index, this round
        self._task: TrainTask | None = None
        self._global: ArrayRecord | None = None

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        task = TrainTask.from_config(config)
        now_s = task.now_s
        chosen = self.selector.select(self.ledger, server_round, now_s)
        self._picked = {self.node_of[int(i)]: int(i) for i in chosen}
        self._task = task
        self._global = arrays
        messages = []
        for node, index in self._picked.items():
            own = TrainTask(server_round, task.day, index, now_s, self.ledger.state(index))
            record = ConfigRecord({**self.experiment, **own.to_config()})
            messages.append(
                Message(
                    RecordDict({ARRAYS: arrays, CONFIG: record}),
                    dst_node_id=node,
                    message_type=MessageType.TRAIN,
                )
            )
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        good: list[RecordDict] = []
        reports: list[RoundReport] = []
        answered: set[int] = set()
        for msg in replies:
            node = msg.metadata.src_node_id
            if node not in self._picked:
                continue
            answered.add(node)
            report, content = self._parse(server_round, node, msg)
            if content is not None:
                problem = _bad_update(content.array_records[ARRAYS], self._global)
                if problem:
                    report = report.with_status("failed", problem)
                else:
                    good.append(content)
            reports.append(report)
        for node, index in self._picked.items():
            if node not in answered:  # no reply before the round timed out
                reports.append(self._empty(server_round, index, "dropped", "no reply"))
        self.reports = sorted(reports, key=lambda r: r.device)
        # Average in device order, not arrival order: float sums depend on
        # order, and a resumed run must reproduce an uninterrupted one exactly.
        good.sort(key=lambda c: str(c.config_records[RECORD_KEY]["device"]))
        if not good:
            return None, None
        arrays = aggregate_arrayrecords(good, NUM_EXAMPLES)
        return arrays, MetricRecord({"num-updates": len(good)})

    def _parse(
        self, server_round: int, node: int, msg: Message
    ) -> tuple[RoundReport, RecordDict | None]:
        index = self._picked[node]
        if msg.has_error():
            reason = condense_error(str(msg.error.reason))
            return self._empty(server_round, index, "failed", reason), None
        content = msg.content
        try:
            report = from_record(content.config_records[RECORD_KEY], node=node)
        except (KeyError, FedbenchError) as exc:
            return self._empty(server_round, index, "failed", f"malformed reply: {exc}"), None
        if report.device != self.ledger.devices[index].name:
            return self._empty(
                server_round,
                index,
                "failed",
                f"reply names device {report.device!r}, expected "
                f"{self.ledger.devices[index].name!r}",
            ), None
        if report.status != "ok":
            return report, None
        if self.deadline_s is not None and report.round_trip_s > self.deadline_s:
            # Late: its update is not averaged, but the energy it spent stays recorded.
            late = f"round trip {report.round_trip_s:.1f}s > deadline {self.deadline_s:g}s"
            return report.with_status("timeout", late), None
        if ARRAYS not in content.array_records or METRICS not in content.metric_records:
            return report.with_status("failed", "malformed reply: no weights or metrics"), None
        return report, content

    def _empty(self, server_round: int, index: int, status: str, reason: str) -> RoundReport:
        device = self.ledger.devices[index]
        day = self._task.day if self._task else server_round
        return RoundReport(
            round=server_round,
            day=day,
            node=self.node_of[index],
            device=device.name,
            profile=device.profile,
            kind=self.identities[index].kind,
            status=status,
            reason=reason,
        )


def _bad_update(arrays: ArrayRecord, reference: ArrayRecord | None) -> str:
    """Why an update must not be averaged in ("" if it is fine)."""
    if reference is not None and set(reference.keys()) != set(arrays.keys()):
        extra = sorted(set(arrays.keys()) - set(reference.keys()))[:3]
        missing = sorted(set(reference.keys()) - set(arrays.keys()))[:3]
        return f"update keys differ from the global model (extra {extra}, missing {missing})"
    for key, array in arrays.items():
        if reference is not None and tuple(reference[key].shape) != tuple(array.shape):
            return (
                f"update '{key}' has shape {tuple(array.shape)}, "
                f"expected {tuple(reference[key].shape)}"
            )
        values = array.numpy()
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            return f"update has NaN/Inf in '{key}'"
    return ""


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
