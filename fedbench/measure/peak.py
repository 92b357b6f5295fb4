"""The measured peak memory of one real training step, independent of the prediction.

torch 2.13 has no CPU counterpart of `torch.cuda.max_memory_allocated`, but
the profiler with `profile_memory=True` records every allocation and free
made through c10's CPU allocator, with the allocator's running total. That
covers what the dispatch-level tracker of workload.py cannot see, such as
buffers allocated inside a kernel (im2col columns, reorders). The step is
the same as the workload measurement's (step.py); the peak is the bytes of
the tensors live when the step starts plus the highest running total of
allocations made during it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from fedbench.measure.step import (
    StepObserver,
    StepSpec,
    isolated,
    optimizer_state_tensors,
    prepare,
    run_step,
)


def _allocations(nodes: Iterable[object]) -> list[tuple[int, int]]:
    """(time ns, signed bytes) of every allocation event in a profiler event tree."""
    found: list[tuple[int, int]] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:  # type: ignore[attr-defined]
            fields = node.extra_fields  # type: ignore[attr-defined]
            if fields.device.type == "cpu":
                found.append((node.start_time_ns, fields.alloc_size))  # type: ignore[attr-defined]
        stack.extend(node.children)  # type: ignore[attr-defined]
    return sorted(found)


def measured_peak_memory(
    model: nn.Module,
    input_shape: tuple[int, ...],
    batch_size: int,
    *,
    optimizer: str = "sgd_momentum",
    trainable: str = "all",
    checkpoint_segments: int = 0,
    microbatches: int = 1,
    input_dtype: torch.dtype = torch.float32,
    input_high: int | None = None,
) -> int:
    """Peak bytes of CPU memory allocated by torch during one real training step."""
    spec = StepSpec(
        input_shape=tuple(input_shape),
        batch_size=batch_size,
        optimizer=optimizer,
        trainable=trainable,
        checkpoint_segments=checkpoint_segments,
        microbatches=microbatches,
        input_dtype=input_dtype,
        input_high=input_high,
    )
    step = prepare(model, spec)
    resident = (
        list(step.model.parameters())
        + list(step.model.buffers())
        + list(optimizer_state_tensors(step.optimizer))
        + [step.inputs, step.targets]
    )
    baseline = sum(
        {id(t.untyped_storage()): t.untyped_storage().nbytes() for t in resident}.values()
    )
    with isolated(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run_step(step, StepObserver())
    running = high = 0
    for _, size in _allocations(prof.profiler.kineto_results.experimental_event_tree()):
        running += size
        high = max(high, running)
    return baseline + high
