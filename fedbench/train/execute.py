"""Run optimizer steps the way a memory plan says, switching plans between steps.

What runs is what the workload measurement measured (fedbench.measure.step):
the same equal micro-batch slices with the loss scaled by 1/m, and the same
checkpoint segmentation of the sequential trunk (measure.checkpointing),
applied to the live model for as long as a plan asks for it and undone
afterwards (the state dict keys never change).

Gradients: for a model without BatchNorm the accumulated gradient is the
full-batch gradient up to float summation order.

BatchNorm (documented choice, as Sage and the usual frameworks do):
- micro-batching normalises each micro-batch with its own statistics, so
  the gradient is not the full-batch gradient (it is the sum of the
  micro-batches' gradients, each under its own normalisation), and the
  running statistics are updated once per micro-batch, i.e. m times per
  optimizer step. With `bn_momentum_scaled` the momentum of those m updates
  is 1 - (1 - momentum)^(1/m), so the old running value decays as much per
  optimizer step as with one full-batch update (the same averaging horizon
  in steps); off by default (plain per-micro-batch updates).
- checkpoint recompute re-runs the segment's forward in training mode,
  which would update the running statistics a second time; the recompute
  restores every BatchNorm buffer of the segment (running mean, variance,
  batch count) on exit, so each forward updates them exactly once. The RNG
  state is preserved by torch.utils.checkpoint, so dropout masks match.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from fedbench.algorithms.base import Objective
from fedbench.core.plans import Plan
from fedbench.measure.checkpointing import CheckpointedSequential, apply_checkpointing, trunk

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _tracks_stats(m: nn.Module) -> bool:
    # BatchNorm (and InstanceNorm with track_running_stats): running buffers
    # that a training-mode forward updates in place.
    return bool(getattr(m, "track_running_stats", False)) and hasattr(m, "running_mean")


def _norms(modules: list[nn.Module]) -> list[nn.Module]:
    return [m for unit in modules for m in unit.modules() if _tracks_stats(m)]


@contextmanager
def _stats_frozen(norms: list[nn.Module]) -> Iterator[None]:
    """Restore the running statistics of `norms` on exit (a recompute must not move them)."""
    saved = [
        (buf, buf.clone())
        for m in norms
        for buf in (m.running_mean, m.running_var, m.num_batches_tracked)
        if isinstance(buf, torch.Tensor)
    ]
    try:
        yield
    finally:
        with torch.no_grad():
            for buf, old in saved:
                buf.copy_(old)


def _contexts(
    norms: list[nn.Module],
) -> tuple[AbstractContextManager[None], AbstractContextManager[None]]:
    # (around the original forward, around the recompute)
    return nullcontext(), _stats_frozen(norms)


class RecomputeSafeCheckpoint(CheckpointedSequential):
    """The measured segmentation, with BatchNorm statistics frozen during recompute."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        units = list(self.inner)
        for group in self.groups:
            norms = _norms(units[group[0] : group[-1] + 1])
            x = checkpoint(
                self._run,
                group[0],
                group[-1],
                x,
                use_reentrant=False,
                context_fn=functools.partial(_contexts, norms),
            )
        return x


@contextmanager
def checkpointed(model: nn.Module, segments: int) -> Iterator[nn.Module]:
    """`model` running its trunk as `segments` checkpointed segments; undone on exit.

    Yields the module to call (the model itself unless it is one Sequential).
    """
    if segments == 0:
        yield model
        return
    containers = trunk(model)
    runnable, wrappers = apply_checkpointing(model, segments)
    safe = [RecomputeSafeCheckpoint(w.inner, w.groups) for w in wrappers]
    try:
        if containers[0][0] is None:
            yield safe[0]
        else:
            for (name, _), wrapper in zip(containers, safe, strict=True):
                setattr(model, str(name), wrapper)
            yield runnable
    finally:
        for name, container in containers:
            if name is not None:
                setattr(model, name, container)


@contextmanager
def _scaled_momentum(model: nn.Module, microbatches: int) -> Iterator[None]:
    # momentum None (a cumulative average) has no horizon to keep: left alone.
    norms = [m for m in model.modules() if _tracks_stats(m) and m.momentum is not None]
    old = [float(getattr(m, "momentum")) for m in norms]  # noqa: B009 - typed as Module attr
    try:
        for m, momentum in zip(norms, old, strict=True):
            setattr(m, "momentum", 1.0 - (1.0 - momentum) ** (1.0 / microbatches))  # noqa: B010
        yield
    finally:
        for m, momentum in zip(norms, old, strict=True):
            setattr(m, "momentum", momentum)  # noqa: B010


class PlanRunner:
    """Optimizer steps of `model` under a plan that may change from one step to the next.

    Checkpointing is applied for the duration of a step only: between steps
    the model is exactly the module it was (same submodules, same state
    dict), so whatever runs there - the budget check, a workload
    measurement of the model - sees the plain model.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: LossFn,
        bn_momentum_scaled: bool = False,
        objective: Objective | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.bn_momentum_scaled = bn_momentum_scaled
        # A client half's micro-batch loss (FjORD's self-distillation) instead of loss_fn's.
        self.objective = objective

    def step(self, x: torch.Tensor, y: torch.Tensor, plan: Plan, batch_size: int) -> float:
        """One optimizer step on (x, y); returns the batch's mean loss."""
        m = plan.microbatches_for(batch_size, len(x))
        self.optimizer.zero_grad(set_to_none=True)
        scaled = self.bn_momentum_scaled and m > 1
        total = 0.0
        with (
            checkpointed(self.model, plan.checkpoint_segments) as net,
            _scaled_momentum(self.model, m) if scaled else nullcontext(),
        ):
            for xb, yb in zip(x.chunk(m), y.chunk(m), strict=True):
                if self.objective is None:
                    loss = self.loss_fn(net(xb), yb)
                else:
                    loss = self.objective(net, xb, yb)
                if m > 1:
                    # Equal slices: the mean of slice means is the batch mean.
                    loss = loss / m
                loss.backward()
                total += float(loss.detach())
                del loss
        self.optimizer.step()
        return total
