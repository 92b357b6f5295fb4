"""The data every party derives from the config: splits and partitions.

Built once per process (the server and each simulated client actor) and
cached, because each client call would otherwise reload and re-split.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from fedbench.data import build_source
from fedbench.data.partition import partition
from fedbench.data.splits import Splits, make_splits


@dataclass(frozen=True)
class DataContext:
    splits: Splits
    partitions: tuple[np.ndarray, ...]  # indices into splits.pool, one per device
    num_classes: int
    augment: bool
    seed: int


def data_context(experiment: dict[str, Any], num_devices: int) -> DataContext:
    data = experiment["data"]
    key = json.dumps(
        [data, list(experiment["model"]["input_shape"]), num_devices, experiment["seed"]],
        sort_keys=True,
    )
    return _build(key)


@functools.lru_cache(maxsize=4)
def _build(key: str) -> DataContext:
    data, input_shape, num_devices, seed = json.loads(key)
    source = build_source(OmegaConf.create(data))
    splits = make_splits(
        source,
        tuple(input_shape),
        seed=seed,
        server_fraction=float(data["server_fraction"]),
        test_fraction=float(data["test_fraction"]),
    )
    scheme = data["partition"]
    parts = partition(
        splits.pool.y.numpy(),
        num_devices,
        scheme=scheme["scheme"],
        alpha=float(scheme.get("alpha", 0.5)),
        seed=seed,
    )
    return DataContext(splits, tuple(parts), int(data["num_classes"]), bool(data["augment"]), seed)
