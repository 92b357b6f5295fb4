from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from fedbench.data.cifar10 import Cifar10Source
from fedbench.data.cifar10_files import write_cifar10_like
from fedbench.data.digits import DigitsSource
from fedbench.data.source import DataSource, Tensors
from fedbench.data.splits import make_splits, split_indices, stratified_holdout
from fedbench.errors import FedbenchError

LABELS = np.repeat(np.arange(10), [50, 60, 70, 80, 90, 100, 110, 120, 130, 7])


def _counts(labels: np.ndarray) -> np.ndarray:
    return np.bincount(labels, minlength=10)


@pytest.mark.parametrize("fraction", [0.05, 0.2, 0.33, 0.5])
def test_stratified_holdout_is_exact_and_proportional(fraction: float) -> None:
    held, rest = stratified_holdout(LABELS, fraction, np.random.default_rng(0))
    assert held.size == round(fraction * LABELS.size)
    assert np.intersect1d(held, rest).size == 0
    assert np.array_equal(np.sort(np.concatenate([held, rest])), np.arange(LABELS.size))
    quota = fraction * _counts(LABELS)
    assert np.all(np.abs(_counts(LABELS[held]) - quota) <= 1)


@pytest.mark.parametrize("official", [False, True])
def test_split_indices_are_disjoint_and_cover(official: bool) -> None:
    idx = split_indices(
        LABELS, seed=3, server_fraction=0.3, test_fraction=None if official else 0.2
    )
    parts = [idx.server, idx.pool] + ([] if idx.test is None else [idx.test])
    everything = np.concatenate(parts)
    assert everything.size == np.unique(everything).size  # disjoint
    assert np.array_equal(np.sort(everything), np.arange(LABELS.size))  # covers
    if official:
        assert idx.test is None
    else:
        assert idx.test is not None and idx.test.size == round(0.2 * LABELS.size)
    rest = LABELS.size - (0 if idx.test is None else idx.test.size)
    assert idx.server.size == round(0.3 * rest)


def test_split_indices_are_seeded() -> None:
    a = split_indices(LABELS, 1, 0.3, 0.2)
    b = split_indices(LABELS, 1, 0.3, 0.2)
    c = split_indices(LABELS, 2, 0.3, 0.2)
    assert a.test is not None and b.test is not None and c.test is not None
    assert np.array_equal(a.server, b.server) and np.array_equal(a.test, b.test)
    assert not np.array_equal(a.test, c.test)


def test_digits_splits_hold_out_a_test_set() -> None:
    s = make_splits(DigitsSource(), (1, 8, 8), seed=0, server_fraction=0.3, test_fraction=0.2)
    assert (len(s.test), len(s.server), len(s.pool)) == (359, 431, 1007)
    assert s.indices is not None and s.indices.test is not None
    parts = np.concatenate([s.indices.server, s.indices.pool, s.indices.test])
    assert parts.size == np.unique(parts).size == 1797
    train, _ = DigitsSource().load((1, 8, 8))
    assert torch.equal(s.test.y, train.y[s.indices.test])
    assert torch.equal(s.pool.y, train.y[s.indices.pool])
    assert set(s.test.y.tolist()) == set(range(10))


def test_official_test_split_is_used(tmp_path: Path) -> None:
    write_cifar10_like(tmp_path, 20, 30, seed=1)
    s = make_splits(Cifar10Source(str(tmp_path)), (3, 32, 32), 0, 0.1, 0.2)
    assert len(s.test) == 30 and s.indices is not None and s.indices.test is None
    assert len(s.server) == 10 and len(s.pool) == 90
    assert np.intersect1d(s.indices.server, s.indices.pool).size == 0


def test_cached_per_arguments() -> None:
    a = make_splits(DigitsSource(), (1, 8, 8), 0, 0.3, 0.2)
    assert make_splits(DigitsSource(), [1, 8, 8], 0, 0.3, 0.2) is a
    b = make_splits(DigitsSource(), (1, 8, 8), 1, 0.3, 0.2)
    assert b is not a
    assert a.indices is not None and b.indices is not None
    assert not np.array_equal(a.indices.pool, b.indices.pool)


@pytest.mark.parametrize(
    ("server", "test", "key"),
    [
        (1.0, 0.2, "data.server_fraction"),
        (-0.1, 0.2, "data.server_fraction"),
        (0.3, 0.0, "data.test_fraction"),
        (0.3, 1.0, "data.test_fraction"),
    ],
)
def test_bad_fractions_name_the_key(server: float, test: float, key: str) -> None:
    with pytest.raises(FedbenchError, match=key):
        make_splits(DigitsSource(), (1, 8, 8), 0, server, test)


@dataclass(frozen=True)
class _Tiny(DataSource):
    name: ClassVar[str] = "tiny"
    num_classes: ClassVar[int] = 2

    def load(self, input_shape: tuple[int, int, int]) -> tuple[Tensors, Tensors]:
        x = torch.zeros((2, *input_shape))
        return Tensors(x, torch.tensor([0, 1])), Tensors.empty(input_shape)


def test_empty_device_pool_is_a_user_error() -> None:
    with pytest.raises(FedbenchError, match="device pool of tiny"):
        make_splits(_Tiny(), (1, 2, 2), 0, 0.9, 0.5)
