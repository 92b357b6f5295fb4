"""An algorithm's client half: what local training does with a key its strategy sends.

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
  (fedbench.algorithms.submodels) trains the width it receives.

fedbench's own train handler applies every half whose key is in the config;
the device mod warns, once per run, when a user's ClientApp never read a key
a half is registered for (fedbench.client.mod).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from fedbench.errors import FedbenchError

_REGISTRY: dict[str, type[ClientHalf]] = {}

H = TypeVar("H", bound="type[ClientHalf]")


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
    return tuple(_REGISTRY[k](config[k]) for k in needed_keys(config))


def registered() -> dict[str, type[ClientHalf]]:
    """Key -> client half, for documentation and checks."""
    return dict(_REGISTRY)
