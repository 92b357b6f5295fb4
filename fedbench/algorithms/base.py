"""An algorithm's two halves: what local training does with a key its strategy sends, and
what the server asks a strategy beyond Flower's interface.

A Flower strategy talks to its clients through the train config of every
message (`msg.content["config"]`): FedProx sends `proximal-mu`, and a client
that ignores it trains plain FedAvg. fedbench keeps one registry from such a
key to the class that honours it on the client, so an algorithm is one file:
the strategy (a subclass of a `flwr.serverapp.strategy` class that adds its
key in `configure_train`) and its `ClientHalf`, registered with
`@client_half`, plus its fedbench/conf/algorithm/<name>.yaml.

A client half may

- `correct` each gradient before every optimizer step (FedProx's proximal
  pull; exact however a memory plan splits the step into micro-batches); a
  `batchable` half's correction is elementwise, so batched training applies
  it to all devices' stacked tensors at once (fedbench.train.batched);
- give the module to train instead of the one the experiment builds
  (`local_model`, from the experiment's model config): a submodel algorithm
  (fedbench.algorithms.submodels) trains the width it receives;
- take its own entries out of the arrays the server sent (`receive`: SCAFFOLD's
  server control variate travels beside the model);
- keep state per device across rounds (`begin` reads it, `reply` writes it):
  the device's Flower `Context.state`, its own in every runtime (fedbench
  carries each device's state with its messages where a worker serves many
  devices: fedbench.server.fleet_strategy);
- draw what a step needs before each optimizer step (`before_step`: FjORD's
  width) and replace the step's loss (`objective`: FjORD's self-distillation);
  one step is one draw however a memory plan splits it into micro-batches;
- edit the reply before it is sent (`reply`: SCAFFOLD's control variate delta).

The server half (`ServerHalf`) is what fedbench's server asks the strategy
beyond Flower's `Strategy` interface: what a run must satisfy
(`check_run`), each device's predicted cost of the model it will train
(`fit_devices`: a submodel's width from its budget), the width the
federation trains (`trained_rate`), which widths are scored
(`evaluated_rates`) and which of the global arrays are the model
(`model_arrays`). A strategy that is not a `ServerHalf` gets the neutral
one (`server_half`): the experiment's model, predicted and scored as it is.

fedbench's own train handler applies every half whose key is in the config;
the device mod warns, once per run, when a user's ClientApp never read a key
a half is registered for (fedbench.client.mod).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, RecordDict
from torch import nn

from fedbench.errors import FedbenchError

_REGISTRY: dict[str, type[ClientHalf]] = {}

H = TypeVar("H", bound="type[ClientHalf]")
# One micro-batch's loss (its mean over the micro-batch) from the module to run and the data.
Objective = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


class ClientHalf:
    """The client's part of an algorithm, made from its key's value in the train config."""

    key: ClassVar[str] = ""  # the train config key the strategy sends
    batchable: ClassVar[bool] = False  # `correct` is elementwise (stacked devices allowed)
    echo: ClassVar[bool] = False  # the reply's metrics repeat the value (the server reads it)

    def __init__(self, value: object) -> None:
        self.value = value

    def corrects(self) -> bool:
        """Whether `correct` changes anything (a FedProx mu of 0 does not)."""
        return False

    def correct(self, grad: torch.Tensor, weight: torch.Tensor, anchor: torch.Tensor) -> None:
        """Change `grad` of `weight` in place; `anchor` is the weight the server sent."""

    def local_model(self, model: nn.Module, config: Mapping[str, Any]) -> nn.Module:
        """The module to load the server's state into and train (default: `model`).

        `config` is the experiment's model config (`ModelConfig.to_plain()`).
        """
        return model

    def label(self) -> str:
        """What this half adds to the workload's name ("" : nothing; "@r0.5": a submodel)."""
        return ""

    @classmethod
    def from_config(cls, value: object, config: Mapping[str, object]) -> ClientHalf:
        """The half for its key's `value`; `config` is the whole train config (its options)."""
        return cls(value)

    def receive(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The server's arrays without this half's own entries (a new dict; default: all)."""
        return state

    def begin(self, model: nn.Module, saved: RecordDict) -> None:
        """Before training `model` (the server's weights loaded); `saved`: the device's state."""

    def before_step(self, step: int, seed: int) -> None:
        """Before optimizer step `step` (from 0) of this round; `seed`: the round's seed."""

    def objective(self, model: nn.Module) -> Objective | None:
        """The loss of one micro-batch in place of cross-entropy (None: cross-entropy)."""
        return None

    def reply(self, model: nn.Module, content: RecordDict, saved: RecordDict) -> None:
        """Edit the reply of a device that trained; write what it keeps into `saved`."""

    @classmethod
    def malformed(cls, value: object, expected: str) -> FedbenchError:
        return FedbenchError(f"malformed server message: {cls.key}={value!r} ({expected})")


def client_half(cls: H) -> H:
    """Register a ClientHalf subclass under its `key` (a class decorator)."""
    key = cls.key
    if not key:
        raise TypeError(f"{cls.__qualname__}: a client half names the train config key it reads")
    known = _REGISTRY.get(key)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise TypeError(f"train config key {key!r} already has a client half: {known.__qualname__}")
    _REGISTRY[key] = cls
    return cls


def load_algorithm(target: str) -> None:
    """Import the module of an algorithm's `_target_`, so that its client half registers."""
    importlib.import_module("fedbench.algorithms")  # the built-in halves
    module, _, _ = target.rpartition(".")
    if module:
        importlib.import_module(module)


def needed_keys(config: Mapping[str, object]) -> list[str]:
    """The keys of `config` a client half is registered for: a client must read them."""
    return sorted(k for k in config if k in _REGISTRY)


def client_halves(config: Mapping[str, object]) -> tuple[ClientHalf, ...]:
    """The client half of every registered key in `config`, in key order."""
    return tuple(_REGISTRY[k].from_config(config[k], config) for k in needed_keys(config))


def registered() -> dict[str, type[ClientHalf]]:
    """Key -> client half, for documentation and checks."""
    return dict(_REGISTRY)


# -- the server half -------------------------------------------------------------------

# Ledger columns the server predicts per device for a model (fedbench.server.fleet_view).
PREDICTED = ("pred_peak_mem_mb", "mem_budget_mb", "pred_latency_s", "pred_energy_j", "pred_comm_s")
Predictions = dict[str, np.ndarray]  # column -> per device (NaN: unknown)
# The server's prediction of every device's round with a model (None: the experiment's).
Predict = Callable[[nn.Module | None], Predictions]


@dataclass(frozen=True)
class RunFacts:
    """What the server tells a server half about the run (fedbench.server.apps)."""

    model: Mapping[str, Any]  # the model config (ModelConfig.to_plain())
    devices: int  # the fleet's size (0 in `check_run`: not expanded yet)
    app: str | None  # a user's app (`app=`), or None: fedbench's own model and handler
    synchronous: bool  # mode=sync: a reply is averaged into the model its round sent
    mode: str  # the run mode's target, for messages
    deadline_s: float | None  # round_close.deadline_s
    device_of: Callable[[Message], int]  # the device a configured message is for


class ServerHalf:
    """The server's part of an algorithm, implemented by its strategy (module docstring)."""

    def check_run(self, run: RunFacts) -> None:
        """Refuse, before the run folder exists, what the algorithm cannot run with."""

    def fit_devices(self, run: RunFacts, predict: Predict) -> tuple[Predictions, np.ndarray]:
        """Each device's predictions for the model it will train, and whether it fits it.

        Default: the experiment's model; a device fits where its predicted peak
        memory is not over its budget (NaN on either side limits nothing).
        """
        pred = predict(None)
        return pred, ~(pred["pred_peak_mem_mb"] > pred["mem_budget_mb"])

    @property
    def trained_rate(self) -> float:
        """The widest width any device trains (1: the whole model): pretrained and headlined."""
        return 1.0

    def evaluated_rates(self) -> tuple[float, ...]:
        """The widths whose submodels the server scores besides the whole model (none)."""
        return ()

    def model_arrays(self, arrays: ArrayRecord) -> ArrayRecord:
        """The model's entries of the global arrays (default: all of them)."""
        return arrays


_NEUTRAL = ServerHalf()


def server_half(strategy: object) -> ServerHalf:
    """The strategy's server half, or the neutral one for a plain Flower strategy."""
    return strategy if isinstance(strategy, ServerHalf) else _NEUTRAL
