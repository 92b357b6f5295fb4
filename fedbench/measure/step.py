"""One real training step, set up the way a plan asks, for the measurers to watch.

Both the workload measurement (workload.py) and the independent peak
measurement (peak.py) run exactly this step on a deep copy of the model:

1. freeze all but the trainable parameters (`trainable`),
2. wrap the sequential trunk in checkpointed segments (`checkpoint_segments`),
3. create the optimizer and prime its state, so the measured step is a
   steady-state step (momentum/Adam buffers already allocated, gradients
   freed by `zero_grad(set_to_none=True)`),
4. run `microbatches` forward/backward passes on equal slices of the batch,
   accumulating gradients, then one optimizer update.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from fedbench.errors import FedbenchError, choices
from fedbench.measure.checkpointing import CheckpointedSequential, apply_checkpointing

OptimizerFactory = Callable[[list[nn.Parameter]], torch.optim.Optimizer]

# Hyper-parameter values do not change what a step computes or stores, but
# whether weight decay is on does (an extra add per parameter, and SGD's
# coupled decay a temporary gradient copy). foreach is pinned so the op
# sequence does not depend on a torch default.
OPTIMIZERS: dict[str, OptimizerFactory] = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.01, foreach=False),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9, foreach=False),
    "sgd_momentum_wd": lambda ps: torch.optim.SGD(
        ps, lr=0.01, momentum=0.9, weight_decay=5e-4, foreach=False
    ),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, foreach=False),
}


def optimizer_factory(name: str) -> OptimizerFactory | None:
    """A key of OPTIMIZERS, or any torch optimizer class by its dotted name (its defaults)."""
    if name in OPTIMIZERS:
        return OPTIMIZERS[name]
    module, _, attr = name.rpartition(".")
    if not module.startswith("torch.optim"):
        return None
    try:
        found = getattr(importlib.import_module(module), attr, None)
    except ImportError:
        return None
    if not (isinstance(found, type) and issubclass(found, torch.optim.Optimizer)):
        return None
    cls: Any = found  # its own defaults; lr may have none
    return lambda ps: cls(ps, lr=1e-3)


@dataclass(frozen=True)
class StepSpec:
    """How the measured step is run."""

    input_shape: tuple[int, ...]  # one example, without the batch dimension
    batch_size: int
    optimizer: str = "sgd_momentum"
    trainable: str = "all"  # "all" or "last:<k>" parameterised modules
    checkpoint_segments: int = 0
    microbatches: int = 1
    input_dtype: torch.dtype = torch.float32
    input_high: int | None = None  # integer inputs (token ids) lie in [0, input_high)

    def validate(self) -> None:
        if optimizer_factory(self.optimizer) is None:
            raise FedbenchError(
                f"optimizer={self.optimizer!r} is unknown; valid: {choices(OPTIMIZERS)}, "
                "or a torch.optim class by its dotted name"
            )
        if self.batch_size < 1:
            raise FedbenchError(f"batch_size={self.batch_size} must be >= 1")
        if self.microbatches < 1 or self.batch_size % self.microbatches:
            raise FedbenchError(
                f"microbatches={self.microbatches} must be >= 1 and divide "
                f"batch_size={self.batch_size}"
            )
        if self.checkpoint_segments < 0:
            raise FedbenchError(f"checkpoint_segments={self.checkpoint_segments} must be >= 0")
        if not self.input_dtype.is_floating_point and (self.input_high or 0) < 1:
            raise FedbenchError(
                f"input_dtype={self.input_dtype} needs input_high >= 1 (got {self.input_high})"
            )

    def example_inputs(self, generator: torch.Generator) -> torch.Tensor:
        size = (self.batch_size, *self.input_shape)
        if self.input_dtype.is_floating_point:
            return torch.randn(size, generator=generator, dtype=self.input_dtype)
        assert self.input_high is not None  # validate() checked it
        return torch.randint(0, self.input_high, size, generator=generator, dtype=self.input_dtype)


class StepObserver:
    """Callbacks of a measurer; the base class watches nothing."""

    def phase(self, name: str | None) -> None:
        """The step enters `name` (forward, backward, optimizer) or ends (None)."""

    def microbatch(self, index: int) -> None:
        """Micro-batch `index` starts."""

    def forward_context(self) -> AbstractContextManager[object]:
        """Entered around each micro-batch's forward and loss."""
        return nullcontext()

    def checkpoint_input(self, tensor: torch.Tensor) -> None:
        """A checkpointed segment keeps `tensor` alive for its recompute."""


@dataclass(frozen=True)
class PreparedStep:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    checkpoints: list[CheckpointedSequential]
    inputs: torch.Tensor
    targets: torch.Tensor
    microbatches: int


def parameterised_modules(model: nn.Module) -> list[nn.Module]:
    """Modules owning parameters directly, in registration order."""
    return [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]


def trainable_parameters(model: nn.Module, trainable: str) -> list[nn.Parameter]:
    """Parameters that train under `trainable` ("all" or "last:<k>")."""
    if trainable == "all":
        return list(model.parameters())
    owners = parameterised_modules(model)
    prefix, _, count = trainable.partition(":")
    if prefix != "last" or not count.isdigit() or not 1 <= int(count) <= len(owners):
        raise FedbenchError(
            f"trainable={trainable!r} is invalid; valid: 'all' or 'last:<k>' with "
            f"1 <= k <= {len(owners)} (parameterised modules of this model)"
        )
    return [p for m in owners[-int(count) :] for p in m.parameters(recurse=False)]


def _example_batch(model: nn.Module, spec: StepSpec) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    inputs = spec.example_inputs(gen)
    # The output shape gives the classes; eval + no_grad leaves BN stats alone.
    model.eval()
    with torch.no_grad():
        probe = model(inputs[:1])
    model.train()
    target_shape = (spec.batch_size, *probe.shape[2:])
    targets = torch.randint(0, int(probe.shape[1]), target_shape, generator=gen)
    return inputs, targets


def cpu_copy(model: nn.Module) -> nn.Module:
    """A deep copy of `model` with every parameter and buffer on the CPU.

    A step is measured on the CPU whatever the host trains on: the aten ops a
    GPU runs differ (cuDNN batch norm, fused dropout, foreach optimizers), and
    what an emulated device is charged must not depend on the host's device.
    The copy is made tensor by tensor, so a model on a GPU is never doubled
    there.
    """
    memo: dict[int, object] = {}
    for p in model.parameters():
        if p.device.type != "cpu":
            memo[id(p)] = nn.Parameter(p.detach().cpu(), requires_grad=p.requires_grad)
    for b in model.buffers():
        if b.device.type != "cpu":
            memo[id(b)] = b.detach().cpu()
    return copy.deepcopy(model, memo)


def prepare(model: nn.Module, spec: StepSpec) -> PreparedStep:
    """A CPU deep copy of `model` (`cpu_copy`) ready for the measured step."""
    spec.validate()
    model = cpu_copy(model)
    train = {id(p) for p in trainable_parameters(model, spec.trainable)}
    params = [p for p in model.parameters() if id(p) in train]
    for p in model.parameters():
        p.requires_grad_(id(p) in train)
        p.grad = None
    inputs, targets = _example_batch(model, spec)
    wrappers: list[CheckpointedSequential] = []
    if spec.checkpoint_segments:
        model, wrappers = apply_checkpointing(model, spec.checkpoint_segments)
    factory = optimizer_factory(spec.optimizer)
    assert factory is not None  # validate() checked it
    optimizer = factory(params)
    # A step on zero gradients allocates the optimizer state; values do not
    # matter on this copy, only what the measured step holds and computes.
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return PreparedStep(model, optimizer, wrappers, inputs, targets, spec.microbatches)


def optimizer_state_tensors(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for state in optimizer.state.values():
        yield from (v for v in state.values() if isinstance(v, torch.Tensor))


@contextmanager
def isolated() -> Iterator[None]:
    """Around a measured step: grad mode on, the caller's RNG stream untouched.

    Dropout draws come from a forked, seeded stream, so measuring - or
    finding a measurement in the cache - does not change what the caller's
    own training draws next. Entered outside the measurement: the RNG state
    copy it keeps is not part of the step.
    """
    with torch.enable_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield


def run_step(step: PreparedStep, observer: StepObserver) -> None:
    """One optimizer step with gradient accumulation over the micro-batches."""
    for wrapper in step.checkpoints:
        wrapper.on_input = observer.checkpoint_input
    step.model.train()
    step.optimizer.zero_grad(set_to_none=True)
    chunks = zip(
        step.inputs.chunk(step.microbatches), step.targets.chunk(step.microbatches), strict=True
    )
    for index, (x, y) in enumerate(chunks):
        observer.microbatch(index)
        observer.phase("forward")
        with observer.forward_context():
            loss = F.cross_entropy(step.model(x), y)
            if step.microbatches > 1:
                loss = loss / step.microbatches
        observer.phase("backward")
        loss.backward()
        del loss
    observer.phase("optimizer")
    step.optimizer.step()
    observer.phase(None)
    for wrapper in step.checkpoints:
        wrapper.on_input = None
