"""Measure the workload of code fedbench did not write, while it runs.

A user's ClientApp trains its own way (its model, its loop, its optimizer).
`LiveRecorder` watches whatever the train handler executes at the aten level
(the same dispatch mode and operator classes as the workload measurement,
recorder.py / opclasses.py) and tells the phases apart from autograd's own
state instead of being told:

- backward: ops autograd's engine runs for a graph task (one graph task per
  `loss.backward()`, which is also how optimizer steps are counted);
- optimizer: in-place ops with gradients disabled outside backward (the
  parameter update);
- forward: everything else (the forward pass, the loss, data preparation,
  and no-grad evaluation, which costs what a forward costs).

`workload()` turns the counts into one `Workload` per step (totals divided by
the number of backward passes), which the emulator costs like a measured one.
The peak of live tensor storages over the call is the memory it needed; the
model's own weights, which arrive as numpy arrays, are a floor under it.

It also times, in process CPU seconds, the stretches of the call outside
torch (`outside_cpu_s`): before its first op, between two ops and after its
last, each counted when it lasts at least `GAP_S`. A torch loop's own Python
between ops (microseconds an op: argument handling, the loop, this
recorder's plumbing) is what the emulator's dispatch and per-step overhead
already charge; a longer stretch is work torch never saw - numpy,
scikit-learn, parsing a data file - which fedbench.devices.cpu_time costs.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import torch

from fedbench.core.workload import OP_CLASSES, OpCost, Workload
from fedbench.measure.recorder import StepRecorder

# A stretch outside torch ops shorter than this (CPU seconds) is a torch loop's own
# Python: in tests/apps/quickstart's training, 99.9% of its 5,000 took under 0.25 ms.
GAP_S = 1e-3


@functools.cache
def warm() -> None:
    """Import what torch imports on the first op under a dispatch mode (torch._dynamo,
    1.5 CPU seconds on the test host), before a call is timed: the host's one-time
    import is not the call's work."""
    import torch._dynamo  # noqa: F401


def _in_place(func: torch._ops.OpOverload) -> bool:
    name = func._overloadpacket.__name__
    return name.endswith("_") or name.startswith("_foreach_")


class LiveRecorder(StepRecorder):
    """A StepRecorder that classifies each op's phase itself and counts backward passes."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.graph_tasks: set[int] = set()
        self.outside_cpu_s = 0.0  # CPU seconds of the stretches outside torch (>= GAP_S)
        self._left = math.nan  # process CPU time when the last op returned (or the call began)
        self._began = math.nan
        self.call_cpu_s = 0.0  # CPU seconds of the whole call

    def __enter__(self) -> LiveRecorder:
        warm()
        self._left = self._began = time.process_time()
        return super().__enter__()  # type: ignore[return-value]

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        now = time.process_time()
        self._outside(now)
        self.call_cpu_s = now - self._began

    def _outside(self, now: float) -> None:
        """The stretch since the last op returned ended at `now`: counted if long."""
        gap = now - self._left
        if gap >= GAP_S:
            self.outside_cpu_s += gap

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self._outside(time.process_time())
        task = torch._C._current_graph_task_id()
        if task >= 0:
            self.phase = "backward"
            self.graph_tasks.add(task)
        elif not torch.is_grad_enabled() and _in_place(func):
            self.phase = "optimizer"
        else:
            self.phase = "forward"
        try:
            return super().__torch_dispatch__(func, types, args, kwargs)
        finally:
            self._left = time.process_time()

    @property
    def ran_ops(self) -> bool:
        """Whether the call ran any op the emulator costs (a FLOP or a byte charged)."""
        return bool(self.calls)

    @property
    def steps(self) -> int:
        """Optimizer steps the call ran: its backward passes (at least 1)."""
        return max(1, len(self.graph_tasks))

    def workload(self, model_name: str, model_bytes: int) -> tuple[Workload, int]:
        """(the average step's workload, the number of steps)."""
        n = self.steps

        def per_step(phase: str) -> dict[str, OpCost]:
            costs = self.costs[phase]
            return {
                c: OpCost(costs.get(c, [0.0, 0.0])[0] / n, costs.get(c, [0.0, 0.0])[1] / n)
                for c in OP_CLASSES
            }

        update = self.costs["optimizer"].values()
        peak = max(self.storages.peak_bytes, model_bytes)
        workload = Workload(
            model=model_name,
            input_shape=(),
            batch_size=0,  # unknown: the handler batches its own data
            plan="app",
            num_params=model_bytes // 4,
            forward=per_step("forward"),
            backward=per_step("backward"),
            optimizer=OpCost(sum(c[0] for c in update) / n, sum(c[1] for c in update) / n),
            param_bytes=model_bytes,
            grad_bytes=0,
            optimizer_state_bytes=0,
            saved_activation_bytes=0,
            workspace_bytes=peak - model_bytes,
            input_bytes=0,
        )
        return workload, n
