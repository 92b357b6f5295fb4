"""NVIDIA GPU board power through NVML, when the pynvml bindings are installed.

fedbench does not depend on pynvml: without it (or without a driver, or
under a fixture root, since NVML always reads the real machine) the source
is absent. Power is nvmlDeviceGetPowerUsage (mW) summed over GPUs; where
every GPU has the total-energy counter (Volta and newer,
nvmlDeviceGetTotalEnergyConsumption, mJ) energy_j() uses it. A GPU board
is one component of the machine, so the scope is "component".
"""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from fedbench.measure.probe.source import COMPONENT, PowerSource
from fedbench.measure.probe.sysfs import is_real_root


def _load_nvml() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


class NvmlSource(PowerSource):
    """GPU power in W; channels "gpu<i>"."""

    name: ClassVar[str] = "nvml"
    scope = COMPONENT

    def __init__(self, root: Path) -> None:
        self._nvml = _load_nvml() if is_real_root(root) else None
        self._handles: list[Any] = []
        self._energy_start_mj: list[int] | None = None
        self._energy_now_mj: list[int] | None = None
        self._channels: dict[str, float] = {}

    def available(self) -> bool:
        if self._nvml is None:
            return False
        try:
            self._nvml.nvmlInit()
            count = self._nvml.nvmlDeviceGetCount()
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            for h in self._handles:
                self._nvml.nvmlDeviceGetPowerUsage(h)
        except Exception:  # NVMLError and friends: no driver, no GPU, not supported
            self._handles = []
        return bool(self._handles)

    def _energy_mj(self) -> list[int] | None:
        assert self._nvml is not None
        try:
            return [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles]
        except Exception:  # pre-Volta GPUs lack the counter
            return None

    def start(self) -> None:
        self._energy_start_mj = self._energy_mj()

    def read(self) -> float | None:
        assert self._nvml is not None
        self._channels = {}
        for i, h in enumerate(self._handles):
            try:
                self._channels[f"gpu{i}"] = self._nvml.nvmlDeviceGetPowerUsage(h) / 1e3
            except Exception:  # a GPU fell off the bus: that sample is missing
                continue
        if self._energy_start_mj is not None:
            self._energy_now_mj = self._energy_mj()
        return sum(self._channels.values()) if self._channels else None

    def channels(self) -> dict[str, float]:
        return self._channels

    def energy_j(self) -> float | None:
        if self._energy_start_mj is None or self._energy_now_mj is None:
            return None
        return (
            sum(n - s for n, s in zip(self._energy_now_mj, self._energy_start_mj, strict=True))
            / 1e3
        )

    def close(self) -> None:
        if self._nvml is not None and self._handles:
            # Shutting down a driver that went away raises; nothing to undo then.
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
