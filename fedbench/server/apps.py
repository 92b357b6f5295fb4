"""The server side of the app a run trains: fedbench's own, or a user's Flower app.

The round loop is the same for both; what differs is where the initial
model, the evaluation, the Flower strategy and the per-round train config
come from, and whether the server can predict each device's cost before it
trains. A subclass answers those; the server assembly (fedbench.server.app)
asks.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fedbench.algorithms.base import server_half
from fedbench.core.device import DeviceSpec
from fedbench.experiment.build import build_algorithm, build_model
from fedbench.experiment.fleet import fleet_index
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.protocol import ARRAYS
from fedbench.runtime.base import build_runtime
from fedbench.scenarios.base import Scenario, build_scenario
from fedbench.scenarios.context import DataContext, data_context
from fedbench.scenarios.pretrain import pretrained_state
from fedbench.server.evaluation import Evaluator, NoEvaluation, TestSplitEvaluation
from fedbench.server.fleet_strategy import FleetStrategy
from fedbench.server.fleet_view import FleetView
from fedbench.server.submodels import (
    ModelOnly,
    SubmodelEvaluation,
    fit_devices,
    pretrained_at_rate,
)
from fedbench.train import hyper


class ServerSide(ABC):
    arrays_key: str = ARRAYS  # the ArrayRecord's name in train messages

    @abstractmethod
    def initial_arrays(self) -> tuple[ArrayRecord, str]:
        """The global model before round 1, and how it was made (for the console)."""

    @abstractmethod
    def algorithm(self) -> Strategy:
        """The Flower strategy that builds messages and aggregates."""

    @abstractmethod
    def evaluator(self, grid: Grid, fleet: FleetStrategy, timeout_s: float) -> Evaluator: ...

    def train_config(self) -> ConfigRecord:
        """What every train message's config carries besides what the strategy adds."""
        return ConfigRecord()

    def predict(self, ledger: Ledger, view: FleetView) -> np.ndarray:
        """Fill the ledger's predictions; the indices of devices predicted not to fit in memory."""
        return np.empty(0, dtype=np.int64)

    def example_counts(self) -> Mapping[str, int]:
        """Device -> the most examples one of its rounds trains on, where the server knows."""
        return {}


class OwnApp(ServerSide):
    """fedbench's own model, data and training (no `app=`)."""

    def __init__(self, experiment: Experiment, devices: Sequence[DeviceSpec]) -> None:
        self.experiment = experiment
        self.devices = devices
        self.scenario = build_scenario(experiment)
        self.ctx = data_context(experiment, len(devices))
        self.model = build_model(experiment.model)
        self.threads = build_runtime(experiment).server_threads
        self._algorithm: Strategy | None = None

    def initial_arrays(self) -> tuple[ArrayRecord, str]:
        pretrain = self.scenario.pretrain
        build = functools.partial(build_model, self.experiment.model)
        rate = server_half(self.algorithm()).trained_rate
        if rate < 1 and pretrain.epochs > 0:  # a fixed-rate run: pretrain what it trains
            state, cached = pretrained_at_rate(
                self.experiment, pretrain, self.ctx, build, rate, self.threads
            )
        else:
            state, cached = pretrained_state(
                self.experiment, pretrain, self.ctx, build, self.threads
            )
        self.model.load_state_dict(state)
        how = "from cache" if cached else f"{pretrain.epochs} epochs"
        return ArrayRecord(self.model.state_dict()), how

    def algorithm(self) -> Strategy:
        if self._algorithm is None:  # built once: its server half is fitted in `predict`
            self._algorithm = build_algorithm(self.experiment)
        return self._algorithm

    def evaluator(self, grid: Grid, fleet: FleetStrategy, timeout_s: float) -> Evaluator:
        half = server_half(self.algorithm())
        evaluator: Evaluator = TestSplitEvaluation(self.model, self.ctx.splits.test, self.threads)
        if half.evaluated_rates():  # and each rate's submodel
            evaluator = SubmodelEvaluation(
                self.model,
                self.ctx.splits.test,
                self.threads,
                self.experiment.model.to_plain(),
                half.evaluated_rates(),
                calibration=self.ctx.splits.server,  # HeteroFL's static BN, on the server's data
                batch_size=self.experiment.train.batch_size,
                headline=half.trained_rate,
            )
        return ModelOnly(evaluator, half.model_arrays)

    def train_config(self) -> ConfigRecord:
        # The train group's hyperparameters, sent the way a Flower ServerApp sends its own.
        return ConfigRecord(hyper.to_config(self.experiment.train.params()))

    def predict(self, ledger: Ledger, view: FleetView) -> np.ndarray:
        # The model each device trains (a submodel's width from its costs), as its half says.
        return fit_devices(
            self.algorithm(), ledger, view, self.experiment, self.scenario, self.ctx, self.model
        )

    def example_counts(self) -> Mapping[str, int]:
        # The scenario deals every device its data, physical ones included.
        return ExampleCounts(self.devices, self.scenario, self.ctx)


class ExampleCounts(Mapping[str, int]):
    """Device name -> the examples a round of it trains on, worked out for the device asked.

    The defense asks about the devices that replied; a dict of every device
    would be a million entries built for a hundred lookups a round.
    """

    def __init__(self, devices: Sequence[DeviceSpec], scenario: Scenario, ctx: DataContext):
        self.index = fleet_index(devices)
        self.scenario = scenario
        self.ctx = ctx

    def __getitem__(self, name: str) -> int:
        return self.scenario.expected_examples(self.ctx, self.index[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class UserApp(ServerSide):
    """A user's Flower app (`app=`): its ServerApp runs its own loop (fedbench.server.app_loop).

    The app makes its initial model, aggregates with its own strategy and
    evaluates as it chooses; nothing of that is fedbench's to build. What is
    left here is what the server assembly asks of every app before the loop:
    a stand-in strategy for the checks and records that name one.
    """

    def __init__(self, experiment: Experiment, devices: Sequence[DeviceSpec]) -> None:
        assert experiment.app is not None
        self.experiment = experiment

    def initial_arrays(self) -> tuple[ArrayRecord, str]:
        return ArrayRecord(), "the app's ServerApp makes it"

    def algorithm(self) -> Strategy:
        # Never aggregates: the app's own strategy does (docs/apps.md).
        return build_algorithm(self.experiment)

    def evaluator(self, grid: Grid, fleet: FleetStrategy, timeout_s: float) -> Evaluator:
        return NoEvaluation()  # the app's loop evaluates; AppLoop records what it reports


def server_side(experiment: Experiment, devices: Sequence[DeviceSpec]) -> ServerSide:
    torch.manual_seed(experiment.seed)
    return OwnApp(experiment, devices) if experiment.app is None else UserApp(experiment, devices)
