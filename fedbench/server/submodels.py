"""The server's side of an algorithm's server half: the run's facts, predictions, scores.

A strategy's server half (fedbench.algorithms.base.ServerHalf; the submodel
strategies of fedbench.algorithms.submodels - HeteroFL, FjORD, FedRolex -
implement one) is asked here, never found by its class: `run_facts` is what
the server tells it, `check_algorithm` refuses what it cannot run with before
the run folder exists, `fit_devices` fills the ledger with each device's
predictions for the model the half chose for it (a submodel's width from its
budget: every rate's submodel predicted like any workload, FleetView.predict,
one emulation per profile, its workload measured and cached per submodel),
so selection, the deadline close and the records see that model's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord
from flwr.serverapp.strategy import Strategy
from torch import nn

from fedbench.algorithms.base import PREDICTED, Predictions, RunFacts, server_half
from fedbench.core.numerics import fixed_threads
from fedbench.data.source import Tensors
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.models import width
from fedbench.scenarios.base import Scenario
from fedbench.scenarios.context import DataContext
from fedbench.scenarios.pretrain import PretrainParams, pretrained_state, recalibrate_batchnorm
from fedbench.server.evaluation import ACCURACY_AT, Evaluator, TestSplitEvaluation
from fedbench.server.fleet_view import FleetView
from fedbench.server.modes import Synchronous, build_mode
from fedbench.server.offer import Offer
from fedbench.train.loop import evaluate


def deadline_of(experiment: Experiment) -> float | None:
    value = experiment.round_close.params.get("deadline_s")
    return None if value is None else float(value)


def run_facts(experiment: Experiment, devices: int = 0) -> RunFacts:
    """What a server half is told about the run (`devices`: the fleet's size; 0 in checks)."""
    return RunFacts(
        model=experiment.model.to_plain(),
        devices=devices,
        app=experiment.app.name if experiment.app is not None else None,
        synchronous=isinstance(build_mode(experiment), Synchronous),
        mode=experiment.mode.target,
        deadline_s=deadline_of(experiment),
        device_of=Offer.device_of,
    )


def check_submodels(strategy: Strategy, experiment: Experiment) -> None:
    """Refuse, before the run folder exists, what the strategy's server half cannot run with."""
    server_half(strategy).check_run(run_facts(experiment))  # before the fleet is expanded


def fit_devices(
    strategy: Strategy,
    ledger: Ledger,
    view: FleetView,
    experiment: Experiment,
    scenario: Scenario,
    ctx: DataContext,
    model: nn.Module,
) -> np.ndarray:
    """The ledger's predictions for the model each device trains; the devices that fit none.

    `model`: the experiment's model, what a half that keeps it predicts.
    """

    def predict(candidate: nn.Module | None) -> Predictions:
        view.predict(ledger, model if candidate is None else candidate, experiment, scenario, ctx)
        return {k: getattr(ledger, k).copy() for k in PREDICTED}

    kept, fits = server_half(strategy).fit_devices(
        run_facts(experiment, len(ledger.devices)), predict
    )
    for key in PREDICTED:
        getattr(ledger, key)[:] = kept[key]
    return np.flatnonzero(~np.asarray(fits, dtype=bool))


class ModelOnly(Evaluator):
    """An evaluator of the model's entries of the global arrays (`ServerHalf.model_arrays`)."""

    def __init__(self, inner: Evaluator, model_arrays: Callable[[ArrayRecord], ArrayRecord]):
        self.inner = inner
        self.model_arrays = model_arrays

    def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
        return self.inner(server_round, self.model_arrays(arrays))


def pretrained_at_rate(
    experiment: Experiment,
    params: PretrainParams,
    ctx: DataContext,
    build_full: Callable[[], nn.Module],
    rate: float,
    threads: int,
) -> tuple[dict[str, torch.Tensor], bool]:
    """The whole model's weights with the server's pretraining of its `rate` submodel in place.

    Under `rate_policy=fixed` no device ever trains the channels beyond
    `rate`, so the federation fine-tunes the submodel, and that is the model
    the server pretrains. Cutting the first channels out of a whole model
    pretrained with all of them would start it from a slice of a network
    that needed the rest (on digits the 1/16 slice of the pretrained
    small_cnn scores 19%): not the "smallest model every device can hold"
    that a study compares against. The submodel is pretrained like any model
    (and cached under its own structure); the channels beyond it keep the
    whole model's seeded initial values. Whether it came from the cache is
    the second value.
    """
    config = experiment.model.to_plain()
    sub, cached = pretrained_state(
        experiment, params, ctx, lambda: width.build_at(config, rate), threads
    )
    with fixed_threads(threads):
        torch.manual_seed(experiment.seed)
        full = build_full().state_dict()
    shapes = {k: tuple(v.shape) for k, v in sub.items()}
    index = width.indices(full, shapes, width.width_rule(config), width.Extraction("first"))
    return width.place(full, index, sub), cached


class SubmodelEvaluation(TestSplitEvaluation):
    """The global model on the test split, and each rate's submodel of it (`accuracy@r0.5`).

    A rate's submodel is the first ceil(r * C) channels of every hidden
    layer (HeteroFL's and FjORD's; FedRolex trains every window, so its
    first window is one of them): what a device of that rate would run.

    BatchNorm is HeteroFL's static BN (sBN, Diao et al. 2021, Sec. 3):
    running statistics averaged over devices that trained different widths
    describe none of them, so before each width is scored its statistics
    are re-estimated on `calibration`, the server's own split (never the
    test split), in one pass in training mode without a gradient. The
    global model the devices get is not changed; with no calibration data
    the aggregated statistics are used as they are.

    `accuracy` and `loss` (what targets, figures and the analysis read) are
    those of `headline`, the widest rate any device trains
    (`SubmodelStrategy.trained_rate`): the whole model, or under
    `rate_policy=fixed` the fixed rate's submodel, whose channels are the only
    ones trained. `accuracy@r1` is always the whole model's.
    """

    def __init__(
        self,
        model: nn.Module,
        test: Tensors,
        threads: int,
        config: dict[str, Any],
        rates: Sequence[float],
        calibration: Tensors | None = None,
        batch_size: int = 32,
        headline: float = 1.0,
    ) -> None:
        super().__init__(model, test, threads)
        self.headline = float(headline)
        self.calibration = calibration if calibration is not None and len(calibration) else None
        self.batch_size = batch_size
        self.config = config
        self.rule = width.width_rule(config)
        scored = sorted({*rates, self.headline}, reverse=True)
        self.subs = {r: width.build_at(config, r) for r in scored if r < 1}

    def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
        self.model.load_state_dict(arrays.to_torch_state_dict())
        full = {k: v.clone() for k, v in self.model.state_dict().items()}  # as aggregated
        loss, accuracy = self._score(self.model)
        out = {"accuracy": accuracy, "loss": loss, f"{ACCURACY_AT}1": accuracy}
        for rate, sub in self.subs.items():
            shapes = {k: tuple(v.shape) for k, v in sub.state_dict().items()}
            index = width.indices(full, shapes, self.rule, width.Extraction("first"))
            sub.load_state_dict(width.extract(full, index))
            sub_loss, sub_accuracy = self._score(sub)
            out[f"{ACCURACY_AT}{rate:g}"] = sub_accuracy
            if rate == self.headline:
                out["accuracy"], out["loss"] = sub_accuracy, sub_loss
        return out

    def _score(self, model: nn.Module) -> tuple[float, float]:
        """Loss and accuracy on the test split, after static BN (class docstring)."""
        with fixed_threads(self.threads):
            if self.calibration is not None:
                with torch.no_grad():
                    recalibrate_batchnorm(model, self.calibration, self.batch_size)
            return evaluate(model, self.test)
