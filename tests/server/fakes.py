"""A grid and devices made of functions: the round loop, tested in milliseconds.

`FakeGrid` delivers each pushed message to a fabricated device (a function
from the message to its reply content) and hands the replies back on the
next pull; nothing is trained, nothing is started.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg, Strategy

from fedbench.client.group import group_mod
from fedbench.core.records import RoundReport, to_record
from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import Ledger
from fedbench.protocol import REPORT, TASK, tasks_from
from fedbench.runtime.seating import PooledSeating
from fedbench.scenarios.base import RoundSpec
from fedbench.server.close.base import RoundClose
from fedbench.server.close.wait_all import WaitForAll
from fedbench.server.defense import Defense
from fedbench.server.evaluation import Evaluator, NoEvaluation
from fedbench.server.fleet_strategy import FleetStrategy
from fedbench.server.loop import LoopParts, RoundLoop
from fedbench.server.modes import RunMode, Synchronous
from fedbench.server.run import LoopState, ServerHook
from strategies.random import RandomSelection
from tests.helpers import task_identity

Device = Callable[[Message], RecordDict | None]  # None: never replies


class UnrunGrid(Grid):
    """A test grid outside any Flower run: what needs one (its run, new messages) raises."""

    def set_run(self, run: object) -> None:  # type: ignore[override]
        raise NotImplementedError

    @property
    def run(self) -> object:  # type: ignore[override]
        raise NotImplementedError

    def create_message(self, *args: object, **kwargs: object) -> Message:  # type: ignore[override]
        raise NotImplementedError


class SendOnlyGrid(UnrunGrid):
    """A test grid that answers node-id asks and send_and_receive only (its subclass's)."""

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError


class FakeGrid(UnrunGrid):
    def __init__(self, devices: dict[str, Device], nodes: Iterable[int] = (1, 2, 3, 4)) -> None:
        self.devices = devices
        self.nodes = list(nodes)
        self.pending: dict[str, Message] = {}
        self.sent: list[Message] = []

    def get_node_ids(self) -> Iterable[int]:
        return self.nodes

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            self.sent.append(msg)
            tasks = tasks_from(msg.content.config_records[TASK])
            if len(tasks) == 1:
                content = self.devices[tasks[0].device](msg)
                if content is not None:
                    self.pending[msg.metadata.message_id] = Message(content, reply_to=msg)
            else:  # several devices in one call: the client's group mod splits and packs
                context = Context(0, 1, {}, RecordDict(), {})
                reply = group_mod(msg, context, self._one)
                self.pending[msg.metadata.message_id] = reply
            ids.append(msg.metadata.message_id)
        return ids

    def _one(self, msg: Message, context: Context) -> Message:
        task = tasks_from(msg.content.config_records[TASK])[0]
        content = self.devices[task.device](msg)
        return Message(content if content is not None else RecordDict(), reply_to=msg)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self.pending.pop(i) for i in list(message_ids) if i in self.pending]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        ids = list(self.push_messages(messages))
        return list(self.pull_messages(ids))


def weights(value: float = 0.0) -> ArrayRecord:
    return ArrayRecord({"w": torch.full((2, 2), value)})


def device(
    round_trip_s: float,
    delta: float = 1.0,
    *,
    energy_j: float = 2.0,
    examples: int = 10,
    status: str = "ok",
    report: bool = True,
    update: Callable[[ArrayRecord], ArrayRecord] | None = None,
) -> Device:
    """A device that adds `delta` to the weights, taking `round_trip_s` virtual seconds."""

    def reply(msg: Message) -> RecordDict:
        task = tasks_from(msg.content.config_records[TASK])[0]
        arrays = next(iter(msg.content.array_records.values()))
        new = ArrayRecord(
            {
                k: torch.from_numpy(np.asarray(v.numpy() + delta, dtype=v.numpy().dtype))
                for k, v in arrays.items()
            }
        )
        content = RecordDict(
            {
                "arrays": update(new) if update else new,
                "metrics": MetricRecord({"num-examples": examples, "train_loss": 0.5}),
            }
        )
        if report:
            r = RoundReport(
                round=task.round,
                day=task.day,
                node=0,
                device=task.device,
                profile="rpi4",
                kind="emulated",
                status=status,
                num_examples=examples if status == "ok" else 0,
                train_loss=0.5,
                latency_s=round_trip_s - 0.1,
                comm_s=0.1,
                round_trip_s=round_trip_s,
                energy_j=energy_j,
            )
            content[REPORT] = to_record(r)
        return content

    return reply


class Recorder(ServerHook):
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.outcomes: list[object] = []

    def before_round(self, spec: RoundSpec, now_s: float) -> None:
        self.calls.append(f"before {spec.round} at {now_s:g}")

    def on_round_end(self, outcome: object, state: LoopState) -> None:  # type: ignore[override]
        self.calls.append(f"after {state.round}")
        self.outcomes.append(outcome)


def build_loop(
    devices: dict[str, Device],
    *,
    k: int,
    algorithm: Strategy | None = None,
    close: RoundClose | None = None,
    overcommit: float = 0.0,
    hooks: list[ServerHook] | None = None,
    evaluator: Evaluator | None = None,
    train_config: ConfigRecord | None = None,
    per_call: int = 1,
    mode: RunMode | None = None,
    defense: Defense | None = None,
) -> tuple[RoundLoop, FakeGrid, Ledger]:
    task_identity()
    names = sorted(devices)
    fleet = expand_fleet({"devices": [{"profile": "host", "count": len(names)}]})
    fleet = tuple(replace(d, name=n) for d, n in zip(fleet, names, strict=True))
    ledger = Ledger(fleet)
    grid = FakeGrid(devices)
    inner = algorithm or FedAvg(
        fraction_evaluate=0.0, min_available_nodes=1, min_train_nodes=1, min_evaluate_nodes=0
    )
    selector = RandomSelection(clients_per_round=k, seed=0, overcommit=overcommit)
    strategy = FleetStrategy(
        inner,
        selector,
        ledger,
        PooledSeating(grid.nodes, per_call=per_call),
        "{}",
        ("emulated",) * len(fleet),
    )
    parts = LoopParts(
        grid,
        strategy,
        close or WaitForAll(),
        evaluator or NoEvaluation(),
        hooks or [],
        train_config or ConfigRecord(),
        "arrays",
        timeout_s=0.2,  # host seconds: a device that never replies costs the test only this
        defense=defense,
    )
    loop = (mode or Synchronous()).loop(parts)
    return loop, grid, ledger


def spec(number: int, evaluate: bool = False) -> RoundSpec:
    return RoundSpec(number, number, 0.0, evaluate)


def finite(x: float) -> bool:
    return not math.isnan(x)
