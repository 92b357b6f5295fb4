"""The meter of an emulated device: real training on the host, cost from the profile.

For each round it measures the workload of the model at every batch size
the job will step with (FLOPs, bytes, memory terms; cached), lets the
device cool from its last known state to the round's start, and emulates
the steps on the profile. Only if the emulator says the plan fits (status
ok) does it run the real training. Every figure is virtual and
deterministic; the host's wall clock never enters the Cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from fedbench.devices.constants import load_constants
from fedbench.devices.cpu import place
from fedbench.devices.emulator import Emulation, emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.meter import Cost, DeviceState, Meter, TrainJob
from fedbench.devices.network import comm_time_s
from fedbench.devices.profile import DeviceProfile, initial_state
from fedbench.devices.step import step_cost
from fedbench.devices.thermal import cool
from fedbench.measure.workload import Workload, measure_workload


class EmulatedMeter(Meter):
    kind = "emulated"

    def __init__(
        self, profile: DeviceProfile, knobs: Knobs, optimizer: str = "sgd_momentum"
    ) -> None:
        self.profile = profile
        self.knobs = knobs
        # The workload's optimizer term and state bytes; the training loop
        # uses SGD with momentum.
        self.optimizer = optimizer
        place(profile, knobs, load_constants(), None)  # refuse bad knobs now, not mid-run

    @classmethod
    def from_config(cls, profile: DeviceProfile, knobs: Mapping[str, Any]) -> EmulatedMeter:
        return cls(profile, Knobs.from_mapping(knobs, "fleet.knobs"))

    @property
    def budget_mb(self) -> float:
        """Memory the device leaves to training (the memory planner's budget)."""
        return float(self.profile.memory.train_budget_mb)

    def step_seconds(self, workload: Workload) -> float:
        """One unthrottled optimizer step of `workload` here: a memory planner's time_fn."""
        consts = load_constants()
        active = place(self.profile, self.knobs, consts, None)
        framework = self.knobs.framework or self.profile.framework.name
        return step_cost(
            self.profile, workload, active, consts, framework, self.knobs.background
        ).seconds

    def start_state(self, job: TrainJob) -> DeviceState:
        """The device at the round's start: its last state cooled while idle until now."""
        state = job.state if job.state is not None else initial_state(self.profile, job.now_s)
        return cool(self.profile, state, job.now_s)

    def workloads(self, model: nn.Module, job: TrainJob) -> list[tuple[Workload, int]]:
        counts = Counter(job.batch_sizes)  # insertion order: full batches, then the remainder
        return [
            (
                measure_workload(
                    model, job.input_shape, bs, model_name=job.model_name, optimizer=self.optimizer
                ),
                n,
            )
            for bs, n in counts.items()
        ]

    def emulate(self, model: nn.Module, job: TrainJob) -> Emulation:
        return emulate(self.profile, self.workloads(model, job), self.start_state(job), self.knobs)

    def measure(
        self, model: nn.Module, job: TrainJob, train: Callable[[], float]
    ) -> tuple[float | None, Cost]:
        emulation = self.emulate(model, job)
        plan = f"bs{max(job.batch_sizes)}" if job.batch_sizes else ""
        cost = emulation.to_cost(comm_time_s(self.profile, job.model_bytes), plan)
        if emulation.status != "ok":
            return None, cost
        return train(), cost
