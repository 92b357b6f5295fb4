"""Local training's hyperparameters as they travel in the train config, Flower's way.

A Flower strategy sends every client the ConfigRecord its ServerApp hands
`configure_train` (plus the strategy's own keys: `server-round`,
`proximal-mu`), and a ClientApp reads `msg.content["config"]["lr"]`.
fedbench's server sends its train group's hyperparameters that way
(`to_config`), so fedbench's own ClientApp, a user's ClientApp and any
stock strategy see the same values; fedbench's train handler reads them
back (`from_config`), refusing a malformed value. Keys are kebab-case, as
Flower's apps spell their config (`local-epochs`, `batch-size`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from fedbench.errors import FedbenchError
from fedbench.train.loop import TrainParams

# Train config key -> (TrainParams field, type, what a valid value is).
KEYS: dict[str, tuple[str, type, str]] = {
    "lr": ("lr", float, "a number > 0"),
    "local-epochs": ("local_epochs", int, "an integer >= 1"),
    "batch-size": ("batch_size", int, "an integer >= 1"),
    "momentum": ("momentum", float, "a number in [0, 1)"),
    "weight-decay": ("weight_decay", float, "a number >= 0"),
}


def to_config(params: TrainParams) -> dict[str, Any]:
    """The hyperparameters of `params`, keyed as the train config carries them."""
    return {key: getattr(params, name) for key, (name, _, _) in KEYS.items()}


def from_config(config: Mapping[str, Any], defaults: TrainParams) -> TrainParams:
    """`defaults` with every hyperparameter the train config carries."""
    values: dict[str, Any] = {}
    for key, (name, kind, valid) in KEYS.items():
        if key not in config:
            continue
        value = config[key]
        if not _valid(name, kind, value):
            raise FedbenchError(f"malformed server message: {key}={value!r} ({valid})")
        values[name] = kind(value)
    return dataclasses.replace(defaults, **values)


def _valid(name: str, kind: type, value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if kind is int:
        return isinstance(value, int) and value >= 1
    if not math.isfinite(value):
        return False
    if name == "lr":
        return value > 0
    if name == "momentum":
        return 0 <= value < 1
    return value >= 0
