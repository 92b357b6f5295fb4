"""A dispatch mode that charges every aten op of a training step and tracks memory.

`StepRecorder` sits under autograd (TorchDispatchMode), so it sees the ops
actually executed: the forward, the backward that autograd runs (including
checkpoint recompute) and the optimizer update. Each op is charged to the
current phase and its operator class (opclasses.py).

It also tracks live tensor storages: a storage is allocated when an op
returns a tensor whose storage it has not seen, and freed when the storage
object dies (weakref callback; torch preserves one Python object per
storage, so the callback fires when the memory is released). The peak of
live bytes over the step is the observed peak memory at tensor level.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from functools import partial
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from fedbench.measure.opclasses import call_parts, charge

PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")


class StorageTracker:
    """Live bytes of tensor storages, with the peak since creation."""

    def __init__(self) -> None:
        self._live: dict[int, tuple[weakref.ref[torch.UntypedStorage], int]] = {}
        self.live_bytes = 0
        self.peak_bytes = 0

    def add(self, tensors: Iterable[torch.Tensor]) -> None:
        for t in tensors:
            if t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = id(storage)
            if key in self._live or storage.nbytes() == 0:
                continue
            nbytes = storage.nbytes()
            self._live[key] = (weakref.ref(storage, partial(self._freed, key)), nbytes)
            self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _freed(self, key: int, _ref: weakref.ref[torch.UntypedStorage]) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.live_bytes -= entry[1]


class StepRecorder(TorchDispatchMode):
    """Charges ops to (phase, op class) and tracks live storages."""

    def __init__(self, params: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.phase: str | None = None
        # Storage ids of the model's parameters: operands read once per step.
        self.params = params
        # phase -> op class -> [flops, bytes]
        self.costs: dict[str, dict[str, list[float]]] = {p: {} for p in PHASES}
        # Every charged call in order: (phase, op class, kind, flops, bytes,
        # narrowest GEMM dimension, output elements, im2col bytes, weight bytes,
        # index into opclasses.NAMED_OPS, kernel taps of a convolution).
        # The emulator times each call on its own (a per-call roofline, a
        # launch cost per call), which class totals cannot express.
        self.calls: list[
            tuple[str, str, str, float, float, float, float, float, float, int, float]
        ] = []
        self.storages = StorageTracker()

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.phase is not None:
            cost = charge(func, args, kwargs, out)
            if cost.op_class is not None:
                slot = self.costs[self.phase].setdefault(cost.op_class, [0.0, 0.0])
                slot[0] += cost.flops
                slot[1] += cost.bytes
                for part in call_parts(func, args, out, cost, self.params):
                    assert part.op_class is not None and part.kind is not None
                    self.calls.append(
                        (
                            self.phase,
                            part.op_class,
                            part.kind,
                            part.flops,
                            part.bytes,
                            part.narrow,
                            part.outputs,
                            part.unfold,
                            part.weights,
                            part.op,
                            part.taps,
                        )
                    )
        leaves, _ = tree_flatten(out)
        self.storages.add(x for x in leaves if isinstance(x, torch.Tensor))
        return out
