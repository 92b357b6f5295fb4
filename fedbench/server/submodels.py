"""The server's side of submodel algorithms: each rate's predicted cost, each device's rate.

A submodel strategy (fedbench.algorithms.submodels: HeteroFL, FjORD,
FedRolex) needs each device's largest affordable width before round 1. Here
every rate's submodel is built and its round predicted like any workload
(FleetView.predict: one emulation per profile, its workload measured and
cached per submodel), the strategy's `rate_policy` picks each device's
rate, and the ledger keeps the chosen rate's predictions, so selection,
the deadline close and the records see the submodel's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord
from flwr.serverapp.strategy import Strategy
from torch import nn

from fedbench.algorithms.submodels import SubmodelStrategy, choose_rates
from fedbench.core.numerics import fixed_threads
from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.models import width
from fedbench.scenarios.base import Scenario
from fedbench.scenarios.context import DataContext
from fedbench.scenarios.pretrain import PretrainParams, pretrained_state, recalibrate_batchnorm
from fedbench.server.evaluation import ACCURACY_AT, TestSplitEvaluation
from fedbench.server.fleet_view import FleetView
from fedbench.server.modes import Synchronous, build_mode
from fedbench.server.offer import Offer
from fedbench.train.loop import evaluate

_PRED = ("pred_peak_mem_mb", "mem_budget_mb", "pred_latency_s", "pred_energy_j", "pred_comm_s")


def deadline_of(experiment: Experiment) -> float | None:
    value = experiment.round_close.params.get("deadline_s")
    return None if value is None else float(value)


def check_submodels(strategy: Strategy, experiment: Experiment) -> None:
    """Refuse, before the run folder exists, what a submodel strategy cannot run with."""
    if not isinstance(strategy, SubmodelStrategy):
        return
    name = type(strategy).__name__
    if experiment.app is not None:
        raise FedbenchError(
            f"algorithm={name}: submodels need fedbench's own model and train handler; "
            f"app={experiment.app.name} brings its own"
        )
    width.width_rule(experiment.model.to_plain())
    if not isinstance(build_mode(experiment), Synchronous):
        raise FedbenchError(
            f"algorithm={name} runs synchronous rounds only (mode=sync): a reply is averaged "
            f"into the model its round sent, and {experiment.mode.target} mixes rounds"
        )
    if strategy.rate_policy == "deadline" and deadline_of(experiment) is None:
        raise FedbenchError(
            "algorithm.rate_policy=deadline needs round_close.deadline_s "
            "(e.g. round_close=deadline round_close.deadline_s=60)"
        )


def fit_rates(
    strategy: SubmodelStrategy,
    ledger: Ledger,
    view: FleetView,
    experiment: Experiment,
    scenario: Scenario,
    ctx: DataContext,
) -> np.ndarray:
    """Bind each device's rate to the strategy; the devices that fit not even the smallest.

    Devices without a prediction (host, physical) get the largest rate
    (fixed: `rate`): nothing is known to limit them.
    """
    config: dict[str, Any] = experiment.model.to_plain()
    per_rate: dict[float, dict[str, np.ndarray]] = {}
    for rate in strategy.rates if strategy.rate_policy != "fixed" else (strategy.rate,):
        view.predict(ledger, width.build_at(config, rate), experiment, scenario, ctx)
        per_rate[rate] = {k: getattr(ledger, k).copy() for k in _PRED}
    budget = next(iter(per_rate.values()))["mem_budget_mb"]
    rates, fits = choose_rates(
        strategy.rate_policy,
        list(per_rate),
        strategy.rate,
        {r: p["pred_peak_mem_mb"] for r, p in per_rate.items()},
        budget,
        {r: p["pred_latency_s"] + np.nan_to_num(p["pred_comm_s"]) for r, p in per_rate.items()},
        deadline_of(experiment),
    )
    for rate, pred in per_rate.items():
        mine = rates == rate
        for key in _PRED:
            getattr(ledger, key)[mine] = pred[key][mine]
    strategy.bind(config, rates, Offer.device_of)
    return np.flatnonzero(~fits)


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
