"""The device a study runs on: an emulated profile or this host (`device=this`).

Studies ask a `Device` for what one training (or inference) step costs, for
the time per phase and operator class, and for the CPU configurations it
offers; they never ask which kind of device it is. `EmulatedDevice`
(emulated.py) answers from the measured workload and the profile, with no
training; `HostDevice` (host.py) times real steps in a fresh worker
process under the probe. `open_device` is the one place that tells them
apart, as the meter does for fedbench runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from fedbench.characterize.models import ModelRef
from fedbench.characterize.workloads import WorkloadBook
from fedbench.core.workload import Workload

THIS = "this"
PRIORITIES: tuple[str, ...] = ("alone", "foreground", "background")


@dataclass(frozen=True)
class CpuConfig:
    """Where the training threads run and how fast those cores may clock."""

    group: str  # big | little | hybrid | all (a device with one kind of core)
    cores: int
    level: str  # H | M | L: highest, middle, lowest clock
    clusters: tuple[str, ...] = ()  # emulated: profile cluster names
    cpus: tuple[int, ...] = ()  # this host: CPU ids to pin to
    freq_cap_ghz: float | None = None  # None: no cap (the governor's choice)
    available: bool = True
    reason: str = ""  # why not available

    @property
    def label(self) -> str:
        return f"{self.group} {self.cores}x {self.level}"


@dataclass(frozen=True)
class StepJob:
    model: ModelRef
    batch_size: int
    cpu: CpuConfig | None = None  # None: the device's default threads and clocks
    # alone: nothing else runs; foreground / background: training has the
    # higher / lower priority than the user's apps running alongside.
    priority: str = "alone"
    forward_only: bool = False  # inference: the forward pass without gradients

    def __post_init__(self) -> None:
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority={self.priority!r}: expected one of {PRIORITIES}")


@dataclass(frozen=True)
class StepResult:
    """What one step cost; NaN for a figure the device cannot produce."""

    status: str  # ok | oom | unavailable | failed
    reason: str
    step_latency_s: float
    energy_j: float
    energy_idle_j: float  # the share of energy_j the device draws when idle
    avg_power_w: float
    peak_mem_mb: float
    mem_budget_mb: float
    freq_ghz: float
    workload: Workload  # memory terms and FLOPs of the step (counted on this host)
    workload_source: str

    @property
    def energy_active_j(self) -> float:
        """Energy above idle: what the training itself added."""
        return self.energy_j - self.energy_idle_j


@dataclass(frozen=True)
class PhaseTime:
    """Time of one (phase, op class) cell of a training step."""

    phase: str  # forward | backward | optimizer | other
    op_class: str
    time_s: float


class Device(ABC):
    name: str
    kind: str  # emulated | measured

    def __init__(self, book: WorkloadBook) -> None:
        self.book = book

    @property
    @abstractmethod
    def fleet_profile(self) -> str:
        """The profile name a fedbench fleet uses for this device."""

    @abstractmethod
    def step(self, job: StepJob) -> StepResult:
        """Cost of one steady-state step of `job`."""

    @abstractmethod
    def phase_times(self, model: ModelRef, batch_size: int) -> tuple[str, list[PhaseTime]]:
        """(status, cells) of one training step split by phase and operator class."""

    @abstractmethod
    def cpu_configs(self) -> list[CpuConfig]:
        """Paper 001's grid: big/little/hybrid cores x high/medium/low clock."""


@dataclass(frozen=True)
class HostOptions:
    """How `device=this` measures (ignored by emulated devices)."""

    warmup: int = 3  # steps run before timing (paper 000 excluded 3)
    steps: int = 5  # timed steps, at least (hostjob.py times more of very short steps)
    threads: int | None = None  # training threads; None = every CPU this process may use


PROCESSORS: tuple[str, ...] = ("cpu", "gpu")
