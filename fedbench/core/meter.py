"""The meter: the one seam between emulated and physical devices.

A ClientApp trains for real on every device; what differs is who says what
that training cost. On a physical device a probe reads sensors around the
real training; on an emulated device the emulator computes the cost of the
same work from the device profile. Both return a `Cost`, which fills the
cost fields of the RoundReport.

The meter is the one place that knows what kind of device it serves. Every
other module asks it: what a round would cost before it runs (`predict`),
the limits an OS should hold the device's training process to (`caps`), the
most a reply from it can plausibly claim (`ceilings`), whether fedbench
starts a process for it at all (`remote`), and the meter of one population
device drawn from it (`varied`). The implementations are in fedbench.devices;
`fedbench.devices.meters.make_meter` builds the one a device's kind names.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch

from fedbench.core.device import DeviceState, Traits
from fedbench.core.plans import FULL, Plan, PlanLog
from fedbench.core.workload import Workload


@dataclass(frozen=True)
class TrainJob:
    """What the client is about to train, as the meter needs to know it."""

    model_name: str
    input_shape: tuple[int, ...]  # one example, e.g. (3, 32, 32)
    batch_sizes: tuple[int, ...]  # the size of every optimizer step, in order
    model_bytes: int  # bytes of the weights sent down and up (network time)
    now_s: float  # the server's virtual clock when the round started
    state: DeviceState | None  # the device's last known emulated state, if any
    plan: Plan = FULL  # the memory plan every step starts with (fedbench.core.plans)
    # Filled by the training loop when it may re-plan mid-round: which plan ran
    # which steps (the meter costs each part).
    plan_log: PlanLog | None = field(default=None, compare=False)
    # What one input example holds: token models take int64 ids in [0, input_high),
    # which the workload measurer must feed them (an embedding cannot take floats).
    input_dtype: torch.dtype = torch.float32
    input_high: int | None = None

    @property
    def plan_label(self) -> str:
        """The plan(s) the job ran, e.g. "bs32" or "bs32>4x8+ckpt4"."""
        if not self.batch_sizes:
            return ""
        bs = max(self.batch_sizes)
        log = self.plan_log
        return log.label(bs) if log is not None and log.runs else self.plan.name(bs)


@dataclass(frozen=True)
class Cost:
    """The cost fields of a RoundReport, as a meter measured or computed them."""

    status: str = "ok"
    reason: str = ""
    latency_s: float = math.nan
    comm_s: float = math.nan
    energy_j: float = math.nan
    avg_power_w: float = math.nan
    peak_mem_mb: float = math.nan
    mem_budget_mb: float = math.nan
    plan: str = ""
    temp_c_start: float = math.nan
    temp_c_end: float = math.nan
    freq_ghz_avg: float = math.nan
    throttled_frac: float = math.nan
    battery_pct: float = math.nan
    # What the figures rest on (fedbench.core.records.COST_BASES): every meter says; a
    # Cost nobody computed (a call that failed before its meter) leaves it empty.
    cost_basis: str = ""
    state_after: DeviceState | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class WatchJob:
    """What a meter knows of training it watches but did not plan (a user's train handler)."""

    model_name: str  # a label for the workload (the app's name)
    model_bytes: int  # bytes of the weights the message carried down (network time)
    now_s: float  # the server's virtual clock when the device starts
    state: DeviceState | None  # the device's last known emulated state, if any


@dataclass(frozen=True)
class Caps:
    """The limits an OS holds the process training as this device to (fedbench.runtime.limits)."""

    cores: int  # CPU cores it trains on (threads, pinned CPUs)
    memory_mb: float  # memory it may give training


@dataclass(frozen=True)
class Ceilings:
    """The most a device can physically report; the server checks replies against it."""

    power_w: float  # every core and the memory busy at once
    memory_mb: float  # all of its RAM
    freq_ghz: float  # its fastest clock


class Watch(AbstractContextManager["Watch"]):
    """A meter watching one call; after it, `cost()` says what the call cost."""

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @abstractmethod
    def cost(self) -> Cost: ...


class WallClockWatch(Watch):
    """The host's own wall clock around the call: the baseline watch."""

    def __enter__(self) -> WallClockWatch:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self.start

    def cost(self) -> Cost:
        return Cost(latency_s=self.elapsed, cost_basis="host")


class Meter(ABC):
    """Measures (or computes) what a training job costs on one device.

    Two ways in: `measure` costs training the caller planned (fedbench's own
    ClientApp: a TrainJob with its memory plan); `watch` costs whatever a
    call executes (any Flower ClientApp under fedbench's device mod).
    """

    kind: str = "host"
    # The device is its own machine: it joins the federation over the network and
    # measures itself, so fedbench starts no process for it.
    remote: bool = False
    # The optimizer key (fedbench.measure.step.OPTIMIZERS) the meter's
    # workloads are measured with; the memory planner measures with it too.
    optimizer: str = "sgd_momentum"

    def predict(self, model: torch.nn.Module, job: TrainJob) -> Cost | None:
        """What the job would cost here, computed without training (None: only measured)."""
        return None

    def caps(self, now_s: float | None = None) -> Caps | None:
        """The limits to hold this device's training to at virtual time `now_s`.

        `now_s=None`: the standing limits of a process that lives the whole run
        (a deployment's SuperNode). None: nothing to hold (the host itself, a
        physical device on its own hardware).
        """
        return None

    def ceilings(self) -> Ceilings | None:
        """The most this device can report (None: not known; generic bounds apply)."""
        return None

    def varied(self, traits: Traits) -> Meter:
        """The meter of one population device drawn from this one (fedbench.population).

        A meter without a profile has nothing to vary: it is its own device.
        """
        return self

    def budget_mb(self, job: TrainJob) -> float | None:
        """MB the device leaves to training when the job starts; None: no limit."""
        return None

    def budget_fn(self, model: torch.nn.Module, job: TrainJob) -> Callable[[int], float] | None:
        """The budget before each optimizer step, if it may change mid-round; else None."""
        return None

    def time_fn(self) -> Callable[[Workload], float] | None:
        """A workload's optimizer-step time on this device (the planner ranks plans by it)."""
        return None

    def holds_fn(self) -> Callable[[Workload], bool] | None:
        """Whether this device keeps a workload's resident set in RAM (None: not known)."""
        return None

    def resident_fn(self) -> Callable[[Workload], float] | None:
        """A workload's process resident set on this device, MB (None: not known)."""
        return None

    @abstractmethod
    def measure(
        self, model: torch.nn.Module, job: TrainJob, train: Callable[[], float]
    ) -> tuple[float | None, Cost]:
        """Run `train` (which returns the mean training loss) and cost it.

        A meter may decline to run `train` - e.g. the emulator predicts the
        plan does not fit the device's memory - and then returns
        `(None, cost)` with a non-ok status.
        """

    def watch(self, job: WatchJob) -> Watch:
        """A context manager that costs the call it surrounds (default: wall clock)."""
        return WallClockWatch()
