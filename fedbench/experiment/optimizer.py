"""conf/train's `optimizer`: a `_partial_` target of a torch optimizer class, checked up front.

`train.optimizer=adam` is short for `{_target_: torch.optim.Adam, _partial_:
true}` (fedbench.train.optimizers.NAMED). The mapping holds the class's own
settings (`nesterov`, `betas`, ...); the hyperparameters every optimizer
shares (`lr`, `momentum`, `weight_decay`) are train.<key>, because they
travel in the train config each round and are handed to the class where it
takes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from fedbench.errors import FedbenchError, choices
from fedbench.experiment.target import TARGET_KEY, Target, check_arguments, locate
from fedbench.train.optimizers import NAMED, SHARED, LocalOptimizer

PARTIAL_KEY = "_partial_"


@dataclass(frozen=True, eq=False)
class OptimizerTarget(Target):
    @classmethod
    def from_config(cls, values: object, where: str) -> OptimizerTarget:
        if isinstance(values, OptimizerTarget):
            return values
        if isinstance(values, str):
            if values not in NAMED:
                raise FedbenchError(
                    f"{where}={values!r}: valid: {choices(NAMED)}, or "
                    f"{{{TARGET_KEY}: <a torch.optim class>, {PARTIAL_KEY}: true, ...}}"
                )
            values = {TARGET_KEY: NAMED[values], PARTIAL_KEY: True}
        if not isinstance(values, Mapping) or TARGET_KEY not in values:
            raise FedbenchError(
                f"{where} must be one of {choices(NAMED)} or a mapping with {TARGET_KEY}, "
                f"got {values!r}"
            )
        if values.get(PARTIAL_KEY) is not True:
            raise FedbenchError(
                f"{where}.{PARTIAL_KEY} must be true: the optimizer is built each round over "
                "the model's parameters"
            )
        target = values[TARGET_KEY]
        found = locate(str(target), where)
        if not (isinstance(found, type) and issubclass(found, torch.optim.Optimizer)):
            raise FedbenchError(f"{where}.{TARGET_KEY}={target}: not a torch.optim.Optimizer")
        settings = {str(k): v for k, v in values.items() if k not in (TARGET_KEY, PARTIAL_KEY)}
        for key in settings:
            if key in SHARED:
                raise FedbenchError(
                    f"{where}.{key}: set train.{key} instead (it travels in the train config "
                    "every round and is given to the optimizer where it takes it)"
                )
        check_arguments(found, {"params": [], **settings}, where)
        return cls(str(target), {PARTIAL_KEY: True, **settings}, where)

    def local(self) -> LocalOptimizer:
        """The optimizer local training builds (fedbench.train.optimizers)."""
        return LocalOptimizer(self.target, self.settings())

    def settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.params.items() if k != PARTIAL_KEY}
