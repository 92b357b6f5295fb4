"""Workload measurement: what one training step of a model asks of a device.

`measure_workload` runs one real training step of a deep copy of the model
on the host (step.py: trainable subset, checkpointed segments,
micro-batches, steady-state optimizer) and counts - it never times, so the
result does not depend on the host's speed or thread count:

- FLOPs and bytes per operator class, forward and backward (backward is
  everything `loss.backward()` runs, checkpoint recompute included), from a
  dispatch mode under autograd (recorder.py; the classification table is in
  opclasses.py); the optimizer update is charged the same way;
- memory terms: parameter (+ buffer) bytes, gradient bytes of trainable
  parameters, optimizer state, the bytes autograd saves for backward (saved
  tensor hooks, unique storages still held when the forward ends,
  parameters and the batch excluded; with checkpointing also each segment's
  input, which the checkpoint keeps) for one micro-batch, the batch
  itself, and the workspace: the peak of live tensor storages over the step
  minus all the other terms (floor 0).

Results are cached in process and as JSON under `cache_dir()/workloads/`.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import asdict

import torch
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from fedbench.core.workload import OP_CLASSES, OpCalls, OpCost, Workload
from fedbench.measure import cache as workload_cache
from fedbench.measure.opclasses import KINDS
from fedbench.measure.recorder import PHASES, StepRecorder
from fedbench.measure.step import (
    StepObserver,
    StepSpec,
    isolated,
    optimizer_state_tensors,
    prepare,
    run_step,
)
from fedbench.paths import cache_dir


def _unique_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[id(storage)] = storage.nbytes()
    return sum(seen.values())


class _WorkloadObserver(StepObserver):
    """Feeds the recorder its phase and counts saved activations.

    A storage packed by a saved-tensor hook counts if it is still alive when
    the forward ends: a graph that is dropped during the forward (e.g. a
    checkpointed segment nothing differentiates through) keeps nothing.
    """

    def __init__(self, recorder: StepRecorder, excluded: Iterable[torch.Tensor]) -> None:
        self.recorder = recorder
        # Storages that are memory terms of their own (model state, batch).
        self._excluded = {id(t.untyped_storage()) for t in excluded}
        self._keep_alive = list(excluded)
        self._saved: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.saved_bytes_per_microbatch: list[int] = []

    def phase(self, name: str | None) -> None:
        self.recorder.phase = name
        if name == "backward":
            self.saved_bytes_per_microbatch.append(sum(self._saved.values()))

    def microbatch(self, index: int) -> None:
        self._saved = WeakIdKeyDictionary()

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        if id(storage) not in self._excluded:
            self._saved[storage] = storage.nbytes()

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        self._count(tensor)
        return tensor

    def forward_context(self) -> AbstractContextManager[object]:
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def checkpoint_input(self, tensor: torch.Tensor) -> None:
        self._count(tensor)


_MEMO: dict[tuple[str, str], Workload] = {}


def measure_workload(
    model: nn.Module,
    input_shape: tuple[int, ...],
    batch_size: int,
    *,
    model_name: str,
    optimizer: str = "sgd_momentum",
    trainable: str = "all",
    plan: str = "full",
    checkpoint_segments: int = 0,
    microbatches: int = 1,
    input_dtype: torch.dtype = torch.float32,
    input_high: int | None = None,
    cache: bool = True,
) -> Workload:
    """Measure one real training step of `model` (see the module docstring).

    `microbatches` m runs the step as m slices of batch_size/m with gradient
    accumulation; `checkpoint_segments` s checkpoints s segments of the
    sequential trunk (checkpointing.py); `plan` is the label recorded.
    `optimizer` is a key of step.OPTIMIZERS; `trainable` is "all" or
    "last:<k>" (the last k parameterised modules in registration order
    train, the rest are frozen). Integer inputs (token ids) take
    `input_dtype=torch.int64` and `input_high` (ids in [0, input_high)), as
    in the model zoo's InputSpec.
    """
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
    spec.validate()
    key = workload_cache.cache_key(model, {**asdict(spec), "model": model_name, "plan": plan})
    # The in-process memo mirrors one cache directory (FEDBENCH_CACHE may change).
    memo_key = (str(cache_dir()), key)
    if cache:
        if memo_key in _MEMO:
            return _MEMO[memo_key]
        stored = workload_cache.load(key)
        if stored is not None:
            _MEMO[memo_key] = Workload.from_dict(stored)
            return _MEMO[memo_key]
    workload = _measure(model, spec, model_name, plan)
    if cache:
        _MEMO[memo_key] = workload
        workload_cache.store(key, workload.to_dict())
    return workload


def _measure(model: nn.Module, spec: StepSpec, model_name: str, plan: str) -> Workload:
    step = prepare(model, spec)
    state = list(step.model.parameters()) + list(step.model.buffers())
    opt_state = list(optimizer_state_tensors(step.optimizer))
    batch = [step.inputs, step.targets]
    recorder = StepRecorder(frozenset(id(p.untyped_storage()) for p in step.model.parameters()))
    recorder.storages.add(state + opt_state + batch)
    observer = _WorkloadObserver(recorder, state + batch)
    with isolated(), recorder:
        run_step(step, observer)

    phases = {p: i for i, p in enumerate(PHASES)}
    classes = {c: i for i, c in enumerate(OP_CLASSES)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    calls = OpCalls(
        phase=tuple(phases[c[0]] for c in recorder.calls),
        op_class=tuple(classes[c[1]] for c in recorder.calls),
        kind=tuple(kinds[c[2]] for c in recorder.calls),
        flops=tuple(c[3] for c in recorder.calls),
        bytes=tuple(c[4] for c in recorder.calls),
        narrow=tuple(c[5] for c in recorder.calls),
        outputs=tuple(c[6] for c in recorder.calls),
        unfold=tuple(c[7] for c in recorder.calls),
        weights=tuple(c[8] for c in recorder.calls),
        op=tuple(c[9] for c in recorder.calls),
        taps=tuple(c[10] for c in recorder.calls),
    )

    def per_class(phase: str) -> dict[str, OpCost]:
        costs = recorder.costs[phase]
        return {c: OpCost(*costs.get(c, (0.0, 0.0))) for c in OP_CLASSES}

    update = recorder.costs["optimizer"].values()
    trainable = [p for p in step.model.parameters() if p.requires_grad]
    param_bytes = _unique_storage_bytes(state)
    grad_bytes = sum(p.numel() * p.element_size() for p in trainable)
    opt_bytes = _unique_storage_bytes(opt_state)
    saved = max(observer.saved_bytes_per_microbatch)
    input_bytes = _unique_storage_bytes(batch)
    static = param_bytes + grad_bytes + opt_bytes + saved + input_bytes
    return Workload(
        model=model_name,
        input_shape=spec.input_shape,
        batch_size=spec.batch_size,
        plan=plan,
        num_params=sum(p.numel() for p in step.model.parameters()),
        forward=per_class("forward"),
        backward=per_class("backward"),
        optimizer=OpCost(sum(c[0] for c in update), sum(c[1] for c in update)),
        param_bytes=param_bytes,
        grad_bytes=grad_bytes,
        optimizer_state_bytes=opt_bytes,
        saved_activation_bytes=saved,
        workspace_bytes=max(0, recorder.storages.peak_bytes - static),
        input_bytes=input_bytes,
        steps_per_update=spec.microbatches,
        calls=calls,
    )
