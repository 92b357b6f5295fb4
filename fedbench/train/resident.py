"""Each device's data kept on the accelerator across rounds, in a warm worker.

A simulation worker serves the same devices round after round, and most of
their data does not change between rounds (the rounds scenario trains every
device on its fixed partition; a daily device trains on one day's data for
every round of that day). `Resident` keeps what a device trained on in GPU
memory under the scenario's key for it (`Scenario.data_key`), so a warm
round copies nothing from the host. It holds at most `budget` bytes (a
quarter of the GPU by default) and forgets the least recently used device
first; what does not fit goes to the GPU through pinned host memory, each
round. On the CPU nothing is copied and nothing is kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch

from fedbench.data.source import Tensors
from fedbench.train.accelerator import total_bytes

SHARE_OF_GPU = 0.25  # of the GPU's memory for resident data; the rest is for training


def nbytes(data: Tensors) -> int:
    return data.x.numel() * data.x.element_size() + data.y.numel() * data.y.element_size()


def to_device(data: Tensors, device: torch.device) -> Tensors:
    """`data` on `device`; from pinned host memory, so the copy runs at full link speed."""
    if data.x.device == device:
        return data
    if device.type == "cuda" and data.x.device.type == "cpu":
        x, y = data.x.pin_memory(), data.y.pin_memory()
        return Tensors(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
    return Tensors(data.x.to(device), data.y.to(device))


class Resident:
    """Device data on one accelerator, least recently used out first (module doc)."""

    def __init__(self, device: torch.device, budget: int | None = None) -> None:
        self.device = device
        if budget is None:
            total = total_bytes(device)
            budget = int(total * SHARE_OF_GPU) if total is not None else 0
        self.budget = budget
        self._held: OrderedDict[Hashable, Tensors] = OrderedDict()
        self.used = 0
        self.hits = 0
        self.copies = 0  # host-to-device copies made (first sight, or too big to keep)

    def get(self, key: Hashable, load: Callable[[], Tensors]) -> Tensors:
        """The data under `key` on the device; `load()` builds it on the host when needed."""
        if self.device.type == "cpu":
            return load()
        held = self._held.get(key)
        if held is not None:
            self._held.move_to_end(key)
            self.hits += 1
            return held
        data = to_device(load(), self.device)
        self.copies += 1
        size = nbytes(data)
        if size <= self.budget:
            while self.used + size > self.budget:
                _, old = self._held.popitem(last=False)
                self.used -= nbytes(old)
            self._held[key] = data
            self.used += size
        return data

    def __len__(self) -> int:
        return len(self._held)
