"""How the global model is scored after an evaluation round.

- `TestSplitEvaluation`: fedbench's own app - the model on the held-out test
  split, on the server (accuracy, loss);
- `NoEvaluation`: nothing to score with.

Each returns the metrics by name; `accuracy` and `loss` are found under the
names Flower apps commonly use.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping

from flwr.app import ArrayRecord
from torch import nn

from fedbench.core.numerics import fixed_threads
from fedbench.data.source import Tensors
from fedbench.train.loop import evaluate

ACCURACY_KEYS: tuple[str, ...] = (
    "accuracy",
    "eval_acc",
    "eval_accuracy",
    "acc",
    "test_acc",
    "central_acc",
    "centralized_accuracy",
)
ACCURACY_AT = "accuracy@r"  # + a width rate: a submodel's accuracy (fedbench.server.submodels)
EXAMPLES_KEY = "num_examples"  # Flower's name for it in an evaluation's MetricRecord
LOSS_KEYS: tuple[str, ...] = ("loss", "eval_loss", "test_loss", "central_loss", "centralized_loss")


class Evaluator(ABC):
    @abstractmethod
    def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]: ...


class NoEvaluation(Evaluator):
    def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
        return {}


class TestSplitEvaluation(Evaluator):
    """On `threads` intra-op threads (runtime.server_threads), whatever the host has."""

    def __init__(self, model: nn.Module, test: Tensors, threads: int = 1) -> None:
        self.model = model
        self.test = test
        self.threads = threads

    def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
        self.model.load_state_dict(arrays.to_torch_state_dict())
        with fixed_threads(self.threads):
            loss, accuracy = evaluate(self.model, self.test)
        # The split's size bounds what a change in accuracy can mean (binomial error).
        return {"accuracy": accuracy, "loss": loss, EXAMPLES_KEY: float(len(self.test))}


def accuracy_of(metrics: Mapping[str, float]) -> float:
    return next((metrics[k] for k in ACCURACY_KEYS if k in metrics), math.nan)


def accuracy_per_rate(metrics: Mapping[str, float]) -> dict[str, float]:
    """A submodel evaluation's accuracy per width rate ("0.5" -> accuracy); {}: none."""
    return {k[len(ACCURACY_AT) :]: v for k, v in metrics.items() if k.startswith(ACCURACY_AT)}


def loss_of(metrics: Mapping[str, float]) -> float:
    return next((metrics[k] for k in LOSS_KEYS if k in metrics), math.nan)


def examples_of(metrics: Mapping[str, float]) -> float:
    """How many test examples the accuracy was measured on (NaN: the evaluator did not say)."""
    return float(metrics.get(EXAMPLES_KEY, math.nan))
