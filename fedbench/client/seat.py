"""Which fleet device a message is for, and what the train handler may ask of it.

The device mod seats every fedbench message before the ClientApp sees it:
the `fedbench` record (fedbench.protocol.TrainTask) names the device, the
experiment gives its profile, and the meter follows from the profile
(fedbench.devices.meters). While the handler runs, `current_seat()` returns
the Seat: fedbench's own handler plans its memory with `seat.meter` and
reports the training it planned through `seat.measure`; a user's handler
never needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from flwr.app import Context, Message

from fedbench.core.device import DeviceSpec
from fedbench.core.meter import Cost, Meter, TrainJob
from fedbench.core.records import RoundReport
from fedbench.devices.meters import make_meter
from fedbench.errors import FedbenchError
from fedbench.experiment.build import workload_optimizer
from fedbench.experiment.codec import EXPERIMENT_KEY, from_json
from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.schema import Experiment
from fedbench.protocol import TASK, TrainTask, tasks_from

# Node config keys of a physical device (python -m fedbench.device).
DEVICE_NAME_KEY = "device-name"
PROFILE_KEY = "profile"


@dataclass
class Measured:
    """What the handler's own measurement said (fedbench's handler fills it)."""

    cost: Cost | None = None
    loss: float | None = None


@dataclass(frozen=True)
class Seat:
    experiment: Experiment
    task: TrainTask
    device: DeviceSpec
    meter: Meter
    node_id: int
    measured: Measured = field(default_factory=Measured, compare=False)

    @property
    def num_devices(self) -> int:
        return len(expand_fleet(self.experiment.fleet))

    def measure(
        self, model: torch.nn.Module, job: TrainJob, train: Callable[[], float]
    ) -> tuple[float | None, Cost]:
        """Train under the device's meter and keep the cost for the report."""
        loss, cost = self.meter.measure(model, job, train)
        self.measured.cost, self.measured.loss = cost, loss
        return loss, cost

    def report(self, status: str = "ok", reason: str = "") -> RoundReport:
        """The device's report for this round, before any cost is filled in."""
        return RoundReport(
            round=self.task.round,
            day=self.task.day,
            node=self.node_id,
            device=self.device.name,
            profile=self.device.profile,
            kind=self.meter.kind,
            status=status,
            reason=reason[:500],
            start_s=self.task.now_s,
            model_version=self.task.model_version,
        )


_CURRENT: ContextVar[Seat | None] = ContextVar("fedbench_seat", default=None)


def current_seat() -> Seat | None:
    """The seat of the message being handled, or None outside fedbench's device mod."""
    return _CURRENT.get()


@contextmanager
def seated(seat: Seat) -> Iterator[Seat]:
    token = _CURRENT.set(seat)
    try:
        yield seat
    finally:
        _CURRENT.reset(token)


def seat_of(msg: Message, context: Context) -> Seat | None:
    """The seat a fedbench message names; None for a message without a fedbench record."""
    record = msg.content.config_records.get(TASK)
    if record is None:
        return None
    text = record.get(EXPERIMENT_KEY)
    if not isinstance(text, str):
        raise FedbenchError(f"malformed server message: no '{EXPERIMENT_KEY}' in '{TASK}'")
    experiment = from_json(text)
    tasks = tasks_from(record)
    if len(tasks) != 1:
        raise FedbenchError(
            f"a message for {len(tasks)} devices reached the device mod; the group mod "
            "(fedbench.client.group) splits it first"
        )
    task = tasks[0]
    devices = expand_fleet(experiment.fleet)
    if not 0 <= task.device_index < len(devices) or devices[task.device_index].name != task.device:
        raise FedbenchError(
            f"malformed server message: device {task.device_index} ({task.device!r}) "
            f"is not in the fleet of {len(devices)} devices"
        )
    device = devices[task.device_index]
    meter = meter_of(experiment, device)
    physical_name = context.node_config.get(DEVICE_NAME_KEY)
    if isinstance(physical_name, str) and physical_name and not meter.remote:
        raise FedbenchError(
            f"this node is the physical device {physical_name!r}, but the server sent it "
            f"emulated device {device.name!r} ({device.profile})"
        )
    if task.traits is not None:
        meter = meter.varied(task.traits)  # the population's draw for this device
    return Seat(experiment, task, device, meter, context.node_id)


def meter_of(experiment: Experiment, device: DeviceSpec) -> Meter:
    """The device's meter, for this experiment's knobs and optimizer."""
    return make_meter(device, experiment.fleet.knobs, workload_optimizer(experiment.train))
