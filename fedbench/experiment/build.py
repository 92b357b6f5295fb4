"""Objects an experiment names, built from its typed groups.

Every `_target_` group is built through `built`, so a group is turned into
its object in one way only. The function that builds a fedbench group sits
beside the group's base class, so this layer imports none of them:
`fedbench.runtime.base.build_runtime`, `fedbench.scenarios.base.build_scenario`,
`strategies.base.build_selector`, `fedbench.server.close.base.build_close`,
`fedbench.server.modes.build_mode`. Flower's strategies (`build_algorithm`)
and fedbench's models are built here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from torch import nn

from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment, ModelConfig, TrainConfig
from fedbench.experiment.target import Target

if TYPE_CHECKING:
    from flwr.serverapp.strategy import Strategy


def workload_optimizer(train: TrainConfig) -> str:
    """The optimizer step (fedbench.measure.step.OPTIMIZERS) training with `train` runs."""
    return train.optimizer.local().workload(train.momentum)


def build_model(model: ModelConfig) -> nn.Module:
    """The experiment's network, freshly initialised (the caller seeds torch)."""
    from fedbench.models import build_from_config

    return build_from_config(model.to_plain())


def built(target: Target, kind: type, what: str) -> Any:
    """`target` built, refused with a clear error if it is not a `kind` (`what`)."""
    obj = target.build()
    if not isinstance(obj, kind):
        raise FedbenchError(f"{target.where}._target_={target.target}: not {what}")
    return obj


def build_algorithm(experiment: Experiment) -> Strategy:
    from flwr.serverapp.strategy import Strategy

    # Flower's strategies log their settings as they are built (e.g. "fraction_evaluate
    # is set to 0.0"); the run folder's flower.log is where Flower's lines go, not the console.
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR)
    try:
        return built(
            experiment.algorithm, Strategy, "a Flower strategy (flwr.serverapp.strategy.Strategy)"
        )
    finally:
        flwr_logger.setLevel(level)
