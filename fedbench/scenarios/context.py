"""The data every party derives from the experiment: splits and partitions.

Built once per process (the server and each simulated client worker) and
cached, because each client call would otherwise reload and re-split.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedbench.data import build_source
from fedbench.data.partition import partition, sizes
from fedbench.data.splits import Splits, make_splits
from fedbench.experiment.schema import DataConfig, Experiment
from fedbench.experiment.typed import dump


@dataclass(frozen=True)
class DataContext:
    splits: Splits
    partitions: Sequence[np.ndarray]  # indices into splits.pool, one per device
    sizes: np.ndarray  # examples per device
    num_classes: int
    augment: bool
    seed: int


def data_context(experiment: Experiment, num_devices: int) -> DataContext:
    return _build(experiment.data, experiment.model.input_shape, num_devices, experiment.seed)


@functools.lru_cache(maxsize=4)
def _build(
    data: DataConfig, input_shape: tuple[int, ...], num_devices: int, seed: int
) -> DataContext:
    from omegaconf import OmegaConf

    source = build_source(OmegaConf.create(dump(data)))
    splits = make_splits(
        source,
        input_shape,
        seed=seed,
        server_fraction=data.server_fraction,
        test_fraction=data.test_fraction,
    )
    pool = splits.pool
    parts = partition(
        pool.y.numpy(),
        num_devices,
        scheme=data.partition.scheme,
        seed=seed,
        params=data.partition.params(),
        ids=None if pool.ids is None else pool.ids.numpy(),
        size=data.partition.size,
    )
    return DataContext(splits, parts, sizes(parts), data.num_classes, data.augment, seed)
