"""The one place that converts between Hydra's config and Flower's records.

The server sends the whole resolved experiment to every client as JSON in a
single ConfigRecord key. Clients rebuild the same objects from it (models,
data, fleet), so emulated and physical devices need nothing but the message.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from flwr.app import ConfigRecord
from omegaconf import DictConfig, OmegaConf

from fedbench.errors import FedbenchError

EXPERIMENT_KEY = "fedbench-config"

# Config groups that must be present after composition (DESIGN.md, conf/).
REQUIRED_GROUPS: tuple[str, ...] = (
    "data",
    "model",
    "fleet",
    "strategy",
    "scenario",
    "train",
    "runtime",
    "report",
)


def resolve(cfg: DictConfig) -> dict[str, Any]:
    """The resolved experiment as plain data (no interpolations, no Hydra node)."""
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    if not isinstance(container, dict):
        raise FedbenchError("the composed config is not a mapping")
    container.pop("hydra", None)
    missing = [g for g in REQUIRED_GROUPS if g not in container]
    if missing:
        raise FedbenchError(f"config is missing the group(s): {', '.join(missing)}")
    return {str(k): v for k, v in container.items()}


def to_flower(experiment: dict[str, Any]) -> ConfigRecord:
    """Hydra -> Flower: the experiment as one JSON string in a ConfigRecord."""
    return ConfigRecord({EXPERIMENT_KEY: json.dumps(experiment, sort_keys=True)})


def from_flower(record: ConfigRecord) -> DictConfig:
    """Flower -> the experiment config, as a read-only DictConfig."""
    if EXPERIMENT_KEY not in record:
        raise FedbenchError(f"malformed server message: no '{EXPERIMENT_KEY}' in its config")
    value = record[EXPERIMENT_KEY]
    if not isinstance(value, str):
        raise FedbenchError(f"malformed server message: '{EXPERIMENT_KEY}' is not a string")
    return _parse(value)


@functools.lru_cache(maxsize=8)
def _parse(text: str) -> DictConfig:
    # Every round carries the same JSON; parse it once per process.
    cfg = OmegaConf.create(json.loads(text))
    OmegaConf.set_readonly(cfg, True)
    return cfg
