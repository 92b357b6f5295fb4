"""Run a model's sequential trunk as gradient-checkpointed segments.

The trunk is the model itself if it is an `nn.Sequential`, otherwise its
top-level children that are `nn.Sequential` (e.g. `features`, `layer1`..),
in registration order. Their children are the trunk's units; `segments`
contiguous groups of units, balanced by count, each run under
`torch.utils.checkpoint.checkpoint(use_reentrant=False)`: the forward keeps
only each segment's input, and the backward recomputes the segment. A
group that spans two Sequential containers is split at the boundary (the
containers are not adjacent calls in general), so the realised number of
checkpoint regions can exceed `segments`. Modules outside the trunk run
normally.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from fedbench.errors import FedbenchError

InputHook = Callable[[torch.Tensor], None]


class CheckpointedSequential(nn.Module):
    """Runs a Sequential's children as checkpointed groups of consecutive units."""

    def __init__(self, inner: nn.Sequential, groups: list[list[int]]) -> None:
        super().__init__()
        self.inner = inner
        self.groups = groups
        # Told each checkpointed segment's input: the checkpoint keeps it
        # alive for recompute, outside autograd's saved-tensor hooks.
        self.on_input: InputHook | None = None

    def _run(self, first: int, last: int, x: torch.Tensor) -> torch.Tensor:
        for module in list(self.inner)[first : last + 1]:
            x = module(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for group in self.groups:
            if self.on_input is not None:
                self.on_input(x)
            x = checkpoint(self._run, group[0], group[-1], x, use_reentrant=False)
        return x


def trunk(model: nn.Module) -> list[tuple[str | None, nn.Sequential]]:
    """(attribute name or None for the model itself, container) of the trunk."""
    if isinstance(model, nn.Sequential):
        return [(None, model)]
    return [(n, c) for n, c in model.named_children() if isinstance(c, nn.Sequential)]


def _split(count: int, segments: int) -> list[tuple[int, int]]:
    # Balanced contiguous ranges [start, stop) over `count` units.
    bounds = [round(k * count / segments) for k in range(segments + 1)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def apply_checkpointing(
    model: nn.Module, segments: int
) -> tuple[nn.Module, list[CheckpointedSequential]]:
    """Rewrite `model` (in place where possible) to checkpoint `segments` trunk groups.

    Returns the model to run (a wrapper if the model itself is Sequential)
    and the checkpointing wrappers, whose `on_input` the caller may set.
    """
    containers = trunk(model)
    units = [(c_index, u) for c_index, (_, c) in enumerate(containers) for u in range(len(c))]
    if not units:
        raise FedbenchError(
            f"checkpoint_segments={segments}: model {type(model).__name__} has no "
            "nn.Sequential trunk to checkpoint (the model itself or its top-level "
            "Sequential children)"
        )
    if segments > len(units):
        raise FedbenchError(
            f"checkpoint_segments={segments}: must be at most the {len(units)} units "
            f"of the model's sequential trunk"
        )
    # Every unit lands in exactly one group: segments cover all units, and a
    # segment contributes one group per container it touches.
    groups: dict[int, list[list[int]]] = {i: [] for i in range(len(containers))}
    for start, stop in _split(len(units), segments):
        touched: dict[int, list[int]] = {}
        for c_index, u in units[start:stop]:
            touched.setdefault(c_index, []).append(u)
        for c_index, group in touched.items():
            groups[c_index].append(group)
    wrappers = []
    for c_index, (name, container) in enumerate(containers):
        wrapper = CheckpointedSequential(container, groups[c_index])
        wrappers.append(wrapper)
        if name is None:
            return wrapper, wrappers
        setattr(model, name, wrapper)
    return model, wrappers
