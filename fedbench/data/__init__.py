"""Datasets, partitioning and the daily data stream.

Typical use by a client: `build_source(cfg.data)` -> `make_splits(...)` ->
`partition(splits.pool.y.numpy(), ...)` -> `DailyStream(splits.pool, part, ...)`.
"""

from __future__ import annotations

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from fedbench.data.partition import SAMPLED, partition
from fedbench.data.source import DataSource, Tensors
from fedbench.data.splits import SplitIndices, Splits, clear_cache, make_splits
from fedbench.data.stream import Augmentation, DailyStream
from fedbench.errors import FedbenchError

__all__ = [
    "SAMPLED",
    "Augmentation",
    "DailyStream",
    "DataSource",
    "SplitIndices",
    "Splits",
    "Tensors",
    "build_source",
    "clear_cache",
    "make_splits",
    "partition",
]


def build_source(cfg_data: DictConfig) -> DataSource:
    """Instantiate `cfg_data.source` and check it agrees with `name`/`num_classes`."""
    if "source" not in cfg_data or "_target_" not in cfg_data.source:
        raise FedbenchError(
            "data.source._target_: missing (e.g. fedbench.data.digits.DigitsSource)"
        )
    target = cfg_data.source._target_
    try:
        source = instantiate(cfg_data.source)
    except InstantiationException as e:
        raise FedbenchError(f"data.source._target_={target!r}: cannot build it: {e}") from e
    if not isinstance(source, DataSource):
        raise FedbenchError(
            f"data.source._target_={target!r}: built a {type(source).__name__}, not a DataSource"
        )
    for key, built in (("name", source.name), ("num_classes", source.num_classes)):
        if key in cfg_data and cfg_data[key] != built:
            raise FedbenchError(
                f"data.{key}={cfg_data[key]!r} disagrees with {target} ({key}={built!r})"
            )
    return source
