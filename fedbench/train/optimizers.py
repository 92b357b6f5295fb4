"""The local optimizer: a `_partial_` target, and the hyperparameters the train config gives it.

`train.optimizer` names a torch optimizer class the Hydra way,
`{_target_: torch.optim.SGD, _partial_: true, nesterov: true}` (or just a
name of `NAMED`: `train.optimizer=adam`); what it holds are the class's own
settings. The hyperparameters every optimizer shares travel in the train
config the server sends each round (fedbench.train.hyper): `lr`,
`momentum`, `weight-decay` are handed to the class where it takes them
(Adam takes no momentum). This module is the one place that knows an
optimizer: training builds it (`build`), the emulator measures its step
(`workload`), batched training asks whether it can replay it (`plain_sgd`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

# Short names for `train.optimizer=<name>`: the class each stands for.
NAMED: dict[str, str] = {
    "sgd": "torch.optim.SGD",
    "adam": "torch.optim.Adam",
    "adamw": "torch.optim.AdamW",
}
# The train config's hyperparameters, as the optimizer classes spell their arguments.
SHARED = ("lr", "momentum", "weight_decay")

# The step the emulator measures for an optimizer class (fedbench.measure.step.OPTIMIZERS):
# how much state it keeps and what its update costs. Hyperparameter values do not change
# what a step computes, but whether momentum is on does. A class without an entry is
# measured as itself (its dotted name).
_WORKLOADS: dict[type[torch.optim.Optimizer], Callable[[float], str]] = {
    torch.optim.SGD: lambda momentum: "sgd_momentum" if momentum > 0 else "sgd",
    torch.optim.Adam: lambda momentum: "adam",
    torch.optim.AdamW: lambda momentum: "adamw",
}


@dataclass(frozen=True)
class LocalOptimizer:
    """A torch optimizer class and its own settings: a `_partial_` target, applied per round."""

    target: str = "torch.optim.SGD"  # the class, dotted
    settings: Mapping[str, Any] = field(default_factory=dict)  # its own arguments

    @functools.cached_property
    def cls(self) -> type[torch.optim.Optimizer]:
        module, _, name = self.target.rpartition(".")
        found = getattr(importlib.import_module(module), name, None)
        if not (isinstance(found, type) and issubclass(found, torch.optim.Optimizer)):
            raise TypeError(f"{self.target} is not a torch.optim.Optimizer")
        return found

    def takes(self) -> tuple[str, ...]:
        """The shared hyperparameters the class takes as arguments."""
        parameters = inspect.signature(self.cls).parameters
        return tuple(k for k in SHARED if k in parameters)

    def build(
        self, parameters: Iterable[torch.nn.Parameter], **hyper: float
    ) -> torch.optim.Optimizer:
        """The optimizer over `parameters`, with the hyperparameters it takes."""
        given: dict[str, Any] = {k: v for k, v in hyper.items() if k in self.takes()}
        return self.cls(parameters, **given, **self.settings)

    def workload(self, momentum: float) -> str:
        """The optimizer step the emulator measures for this optimizer (its key or dotted name)."""
        pick = _WORKLOADS.get(self.cls)
        return pick(momentum) if pick is not None else self.target

    def plain_sgd(self) -> bool:
        """torch.optim.SGD with no settings of its own (no Nesterov, no dampening)."""
        return self.cls is torch.optim.SGD and not self.settings


SGD = LocalOptimizer()
