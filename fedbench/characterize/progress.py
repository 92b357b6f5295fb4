"""A study's progress: every step it asks its device for advances the study's task.

Studies do not count their own steps: `run_study` hands them the device
wrapped in `ShownDevice`, so a new study shows its progress (which model and
batch it is measuring, how many steps so far) without a line of its own.
"""

from __future__ import annotations

from typing import Any

from fedbench.characterize.device import CpuConfig, Device, PhaseTime, StepJob, StepResult
from fedbench.characterize.models import ModelRef
from fedbench.report.progress import Task


class ShownDevice(Device):
    def __init__(self, inner: Device, task: Task) -> None:
        super().__init__(inner.book)
        self.inner = inner
        self.task = task
        self.name = inner.name
        self.kind = inner.kind

    @property
    def fleet_profile(self) -> str:
        return self.inner.fleet_profile

    def step(self, job: StepJob) -> StepResult:
        config = f", {job.cpu.label}" if job.cpu is not None else ""
        self.task.update(f"{job.model.label} @ batch {job.batch_size}{config} ({job.priority})")
        result = self.inner.step(job)
        self.task.advance()
        return result

    def phase_times(self, model: ModelRef, batch_size: int) -> tuple[str, list[PhaseTime]]:
        self.task.update(f"{model.label} @ batch {batch_size}: time per phase")
        result = self.inner.phase_times(model, batch_size)
        self.task.advance()
        return result

    def cpu_configs(self) -> list[CpuConfig]:
        return self.inner.cpu_configs()

    def __getattr__(self, name: str) -> Any:  # what a study reads of a specific device
        return getattr(self.inner, name)
