"""Workload measurement: what one training step of a model asks of a device.

INTERFACE FIXED BY THE CORE; the measurement itself is being written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Operator classes the emulator's roofline distinguishes (DESIGN.md).
OP_CLASSES: tuple[str, ...] = ("dense", "depthwise", "elementwise", "movement")


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float  # bytes read + written


@dataclass(frozen=True)
class Workload:
    """One optimizer step of `model` at `batch_size` under `plan`."""

    model: str
    input_shape: tuple[int, ...]
    batch_size: int
    plan: str  # "full", or a memory plan such as "4x8+ckpt" (memory planner)
    num_params: int
    forward: Mapping[str, OpCost]  # per op class in OP_CLASSES
    backward: Mapping[str, OpCost]  # per op class, includes checkpoint recompute
    optimizer: OpCost  # the parameter update
    param_bytes: int
    grad_bytes: int
    optimizer_state_bytes: int
    saved_activation_bytes: int  # exact, from autograd saved-tensor hooks
    workspace_bytes: int  # transient bytes live at the peak beyond the above
    input_bytes: int
    steps_per_update: int = 1  # micro-batches per optimizer step

    @property
    def total_flops(self) -> float:
        return sum(c.flops for c in self.forward.values()) + sum(
            c.flops for c in self.backward.values()
        ) + self.optimizer.flops

    @property
    def peak_bytes(self) -> int:
        return (
            self.param_bytes
            + self.grad_bytes
            + self.optimizer_state_bytes
            + self.saved_activation_bytes
            + self.workspace_bytes
            + self.input_bytes
        )
