"""The meter interface (fedbench.core.meter) and the host's own meter.

`HostMeter` is this machine measured by wall clock only: the baseline. The
emulated and the physical device's meters are in emulated_meter.py and
probe_meter.py; fedbench.devices.meters picks one per device.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from fedbench.core.device import DeviceState
from fedbench.core.meter import Cost, Meter, TrainJob, WallClockWatch, Watch, WatchJob

__all__ = [
    "Cost",
    "DeviceState",
    "HostMeter",
    "Meter",
    "TrainJob",
    "WallClockWatch",
    "Watch",
    "WatchJob",
]


class HostMeter(Meter):
    """The host itself, measured by wall clock only: the baseline meter."""

    kind = "host"

    def measure(
        self, model: torch.nn.Module, job: TrainJob, train: Callable[[], float]
    ) -> tuple[float | None, Cost]:
        start = time.perf_counter()
        loss = train()
        elapsed = time.perf_counter() - start
        return loss, Cost(latency_s=elapsed, plan=job.plan_label, cost_basis="host")
