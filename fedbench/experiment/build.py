"""Objects an experiment names, built from its typed groups (every `_target_` here).

The server, the clients and preflight build through these functions, so a
group is turned into its object in one way only.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from torch import nn

from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment, ModelConfig, TrainConfig
from fedbench.experiment.target import Target

if TYPE_CHECKING:
    from flwr.serverapp.strategy import Strategy

    from fedbench.runtime.base import Runtime
    from fedbench.scenarios.base import Scenario
    from fedbench.server.close.base import RoundClose
    from fedbench.server.modes import RunMode
    from strategies.base import SelectionStrategy


def workload_optimizer(train: TrainConfig) -> str:
    """The optimizer key (fedbench.measure.step.OPTIMIZERS) training with `train` runs."""
    if train.optimizer == "sgd":
        return "sgd_momentum" if train.momentum > 0 else "sgd"
    return train.optimizer


def build_model(model: ModelConfig) -> nn.Module:
    """The experiment's network, freshly initialised (the caller seeds torch)."""
    from fedbench.models import build_from_config

    return build_from_config(model.to_plain())


def _built(target: Target, kind: type, what: str) -> Any:
    """`target` built, refused with a clear error if it is not a `kind` (`what`)."""
    built = target.build()
    if not isinstance(built, kind):
        raise FedbenchError(f"{target.where}._target_={target.target}: not {what}")
    return built


@functools.lru_cache(maxsize=8)
def build_runtime(experiment: Experiment) -> Runtime:
    from fedbench.runtime.base import Runtime

    return _built(experiment.runtime, Runtime, "a fedbench runtime (fedbench.runtime)")


def build_selector(experiment: Experiment) -> SelectionStrategy:
    from strategies.base import SelectionStrategy

    return _built(
        experiment.strategy,
        SelectionStrategy,
        "a device-selection strategy (strategies.base.SelectionStrategy); "
        "Flower strategies go in algorithm=",
    )


def build_algorithm(experiment: Experiment) -> Strategy:
    from flwr.serverapp.strategy import Strategy

    # Flower's strategies log their settings as they are built (e.g. "fraction_evaluate
    # is set to 0.0"); the run folder's flower.log is where Flower's lines go, not the console.
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR)
    try:
        return _built(
            experiment.algorithm, Strategy, "a Flower strategy (flwr.serverapp.strategy.Strategy)"
        )
    finally:
        flwr_logger.setLevel(level)


def build_close(experiment: Experiment) -> RoundClose:
    from fedbench.server.close.base import RoundClose

    return _built(
        experiment.round_close, RoundClose, "a round-close policy (fedbench.server.close)"
    )


@functools.lru_cache(maxsize=8)
def build_mode(experiment: Experiment) -> RunMode:
    from fedbench.server.modes import RunMode

    return _built(experiment.mode, RunMode, "a run mode (fedbench.server.modes)")


@functools.lru_cache(maxsize=8)
def build_scenario(experiment: Experiment) -> Scenario:
    from fedbench.scenarios.base import Scenario

    return _built(experiment.scenario, Scenario, "a fedbench scenario (fedbench.scenarios)")
