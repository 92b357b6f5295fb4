"""What one training step of a model asks of a device: FLOPs, bytes and memory terms.

A value type shared by the layers that produce it (fedbench.measure measures
it on the host), cost it (fedbench.devices emulates it on a profile) and
plan with it (fedbench.train's memory planner). How it is measured is in
fedbench.measure.workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# Operator classes the emulator's roofline distinguishes (docs/devices.md "Devices: profiles and
# the emulator"; fedbench.measure.opclasses classifies every aten call into one).
OP_CLASSES: tuple[str, ...] = ("dense", "depthwise", "elementwise", "movement")


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float  # bytes read + written


@dataclass(frozen=True)
class OpCalls:
    """Every charged aten call of the step, in execution order, as columns.

    The class totals in `Workload.forward`/`backward` are sums over these;
    the emulator needs the calls themselves: a small call neither fills the
    cores nor amortises its launch, and whether a call's operands fit in
    cache depends on the call's size, not on its class's total.
    """

    phase: tuple[int, ...]  # index into recorder.PHASES (forward, backward, optimizer)
    op_class: tuple[int, ...]  # index into OP_CLASSES
    kind: tuple[int, ...]  # index into opclasses.KINDS (the call's shape)
    flops: tuple[float, ...]
    bytes: tuple[float, ...]  # read + written by the call (opclasses.charge)
    narrow: tuple[float, ...]  # smallest GEMM dimension of dense calls, else 0
    outputs: tuple[float, ...]  # elements written: the work threads can split
    unfold: tuple[float, ...]  # bytes of a convolution's im2col matrix, else 0
    weights: tuple[float, ...]  # bytes of parameters (weight gradients) a GEMM call touches
    # Which aten op the call is, where a framework lowers it differently
    # (index into fedbench.measure.opclasses.NAMED_OPS; 0: any other op;
    # empty: not recorded, every call 0).
    op: tuple[int, ...] = ()
    taps: tuple[float, ...] = ()  # kernel taps (kh x kw) of convolution calls, else 0

    def __len__(self) -> int:
        return len(self.flops)


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
    param_bytes: int  # parameters and buffers (e.g. BN running stats)
    grad_bytes: int
    optimizer_state_bytes: int
    saved_activation_bytes: int  # exact, from autograd saved-tensor hooks
    workspace_bytes: int  # transient bytes live at the peak beyond the above
    input_bytes: int
    # Micro-batches per optimizer step; 0: work outside any step (measured_cycles alone).
    steps_per_update: int = 1
    calls: OpCalls | None = None  # every charged call (None: hand-built workloads)
    # Serial work the step ran outside any aten op the trace costs (numpy, scikit-learn:
    # fedbench.devices.cpu_time), in cycles of a core of IPC scale 1 at 1 GHz = 1e9 a second.
    measured_cycles: float = 0.0

    @property
    def total_flops(self) -> float:
        return (
            sum(c.flops for c in self.forward.values())
            + sum(c.flops for c in self.backward.values())
            + self.optimizer.flops
        )

    @property
    def micro_batch(self) -> int:
        """Images per forward and backward pass: the batch over its micro-batches."""
        return self.batch_size // max(1, self.steps_per_update)

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

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form; `from_dict` inverts it exactly."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Workload:
        fields = dict(data)
        fields["input_shape"] = tuple(fields["input_shape"])
        for phase in ("forward", "backward"):
            fields[phase] = {k: OpCost(**v) for k, v in fields[phase].items()}
        fields["optimizer"] = OpCost(**fields["optimizer"])
        calls = fields.get("calls")
        if calls is not None:
            fields["calls"] = OpCalls(**{k: tuple(v) for k, v in calls.items()})
        return cls(**fields)
