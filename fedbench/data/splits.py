"""The three disjoint splits of one dataset: server, device pool, test.

- test: the source's official test split; when it has none (digits), a
  seeded, stratified holdout of `test_fraction` of the train pool.
- server: a seeded, stratified `server_fraction` of what remains, used to
  pretrain the model on the server before any device trains (paper 000
  starts the daily fine-tuning from a server-trained model).
- pool: the rest, partitioned across devices (`partition.py`).

Every simulated client calls `make_splits`, so results are cached per
process, keyed by the arguments (sources are frozen dataclasses, hashable by
value). The cached tensors are shared: treat them as read-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fedbench.data.source import DataSource, Tensors, check_input_shape
from fedbench.errors import FedbenchError

# Distinct random streams per purpose, so changing one split leaves the other.
_TEST_STREAM = 0
_SERVER_STREAM = 1


@dataclass(frozen=True)
class SplitIndices:
    """Positions in the source's train pool; `test` is None for an official test split."""

    server: np.ndarray
    pool: np.ndarray
    test: np.ndarray | None


@dataclass(frozen=True)
class Splits:
    server: Tensors
    pool: Tensors
    test: Tensors
    indices: SplitIndices | None = None  # None only when built by hand


def stratified_holdout(
    labels: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(held, rest): `round(fraction * N)` positions, each class in proportion.

    Per-class quotas are floored and the leftover goes to the classes with
    the largest remainders, so the total is exact and no class is off by
    more than one from its proportional share.
    """
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    quota = fraction * counts
    take = np.floor(quota).astype(np.int64)
    leftover = int(round(fraction * labels.size)) - int(take.sum())
    if leftover > 0:
        # Random tie-break, so equal remainders do not always favour low labels.
        order = np.lexsort((rng.random(classes.size), -(quota - take)))
        take[order[:leftover]] += 1
    held = []
    for cls, k in zip(classes, take, strict=True):
        members = np.flatnonzero(labels == cls)
        held.append(rng.permutation(members)[:k])
    held_idx = np.sort(np.concatenate(held)) if held else np.empty(0, dtype=np.int64)
    rest = np.setdiff1d(np.arange(labels.size), held_idx, assume_unique=True)
    return held_idx.astype(np.int64), rest.astype(np.int64)


def split_indices(
    labels: np.ndarray,
    seed: int,
    server_fraction: float,
    test_fraction: float | None,
) -> SplitIndices:
    """Index bookkeeping of `make_splits`; `test_fraction=None` means an official test split."""
    if test_fraction is None:
        test, rest = None, np.arange(len(labels), dtype=np.int64)
    else:
        rng = np.random.default_rng([seed, _TEST_STREAM])
        test, rest = stratified_holdout(labels, test_fraction, rng)
    rng = np.random.default_rng([seed, _SERVER_STREAM])
    server_local, pool_local = stratified_holdout(labels[rest], server_fraction, rng)
    return SplitIndices(server=rest[server_local], pool=rest[pool_local], test=test)


def _check_fraction(key: str, value: float, allow_zero: bool) -> float:
    low_ok = value >= 0.0 if allow_zero else value > 0.0
    if not (low_ok and value < 1.0):
        valid = "0 <= value < 1" if allow_zero else "0 < value < 1"
        raise FedbenchError(f"{key}={value}: must satisfy {valid}")
    return float(value)


def make_splits(
    source: DataSource,
    input_shape: Sequence[int],
    seed: int,
    server_fraction: float,
    test_fraction: float,
) -> Splits:
    """Load `source` at `input_shape` and split it (cached per process)."""
    return _make_splits(
        source,
        check_input_shape(input_shape),
        int(seed),
        _check_fraction("data.server_fraction", server_fraction, allow_zero=True),
        float(test_fraction),
    )


def clear_cache() -> None:
    """Drop cached splits (they hold whole datasets in memory)."""
    _make_splits.cache_clear()


# Small: a CIFAR-10 entry at 32x32 is ~700 MB of float32.
@lru_cache(maxsize=4)
def _make_splits(
    source: DataSource,
    input_shape: tuple[int, ...],
    seed: int,
    server_fraction: float,
    test_fraction: float,
) -> Splits:
    train, official_test = source.load(input_shape)
    has_official = len(official_test) > 0
    if not has_official:
        _check_fraction("data.test_fraction", test_fraction, allow_zero=False)
    idx = split_indices(
        train.y.numpy(), seed, server_fraction, None if has_official else test_fraction
    )
    test = official_test if idx.test is None else train.subset(idx.test)
    splits = Splits(train.subset(idx.server), train.subset(idx.pool), test, idx)
    for part, size in (("device pool", len(splits.pool)), ("test split", len(splits.test))):
        if size == 0:
            raise FedbenchError(
                f"data.server_fraction={server_fraction}, data.test_fraction={test_fraction}: "
                f"the {part} of {source.name} ({len(train)} train images) would be empty"
            )
    return splits
