from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.partition import MAX_DRAWS, SCHEMES, partition, sizes
from fedbench.errors import FedbenchError

LABELS = np.random.default_rng(0).integers(0, 10, size=1000)


def _check_disjoint_cover(parts: list[np.ndarray], n: int) -> None:
    everything = np.concatenate(parts)
    assert everything.size == n == np.unique(everything).size
    assert np.array_equal(np.sort(everything), np.arange(n))
    assert all(p.dtype == np.int64 for p in parts)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("k", [1, 7, 50])
def test_disjoint_and_covering(scheme: str, k: int) -> None:
    parts = partition(LABELS, k, scheme, alpha=0.5, seed=1)
    assert len(parts) == k
    _check_disjoint_cover(parts, LABELS.size)
    assert min(p.size for p in parts) >= 1


def test_iid_sizes_differ_by_at_most_one() -> None:
    for k in (3, 7, 13, 1000):
        sizes = [p.size for p in partition(LABELS, k, "iid", alpha=0.0, seed=2)]
        assert max(sizes) - min(sizes) <= 1


def _label_skew(parts: list[np.ndarray]) -> float:
    """Mean total-variation distance of each partition's labels from the global mix."""
    overall = np.bincount(LABELS, minlength=10) / LABELS.size
    tv = [
        0.5 * np.abs(np.bincount(LABELS[p], minlength=10) / p.size - overall).sum() for p in parts
    ]
    return float(np.mean(tv))


def test_small_alpha_is_more_skewed() -> None:
    skew = {
        a: _label_skew(partition(LABELS, 10, "dirichlet", a, seed=3)) for a in (0.1, 1.0, 100.0)
    }
    assert skew[0.1] > skew[1.0] > skew[100.0]
    # Large alpha splits each class almost exactly evenly: below IID's sampling noise
    # (~0.11 for 100 examples over 10 classes).
    iid = _label_skew(partition(LABELS, 10, "iid", 0.0, seed=3))
    assert skew[100.0] < iid < 0.2 < 0.5 < skew[0.1]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_seeded(scheme: str) -> None:
    a = partition(LABELS, 8, scheme, 0.3, seed=5)
    b = partition(LABELS, 8, scheme, 0.3, seed=5)
    c = partition(LABELS, 8, scheme, 0.3, seed=6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_dirichlet_respects_min_size() -> None:
    parts = partition(LABELS, 20, "dirichlet", 0.5, seed=0, min_size=10)
    assert min(p.size for p in parts) >= 10


@pytest.mark.parametrize("k", [0, -1, 1001])
def test_bad_partition_counts(k: int) -> None:
    with pytest.raises(FedbenchError, match=f"num_partitions={k}.*1000"):
        partition(LABELS, k, "iid", 0.5, seed=0)


def test_unknown_scheme_lists_choices() -> None:
    with pytest.raises(FedbenchError, match="valid: dirichlet, iid"):
        partition(LABELS, 2, "pathological", 0.5, seed=0)


def test_min_size_impossible_names_the_values() -> None:
    with pytest.raises(FedbenchError, match="min_size=30 with num_partitions=40.*1000"):
        partition(LABELS, 40, "iid", 0.5, seed=0, min_size=30)


def test_dirichlet_that_never_fills_every_partition() -> None:
    labels = np.repeat(np.arange(10), 10)
    with pytest.raises(
        FedbenchError, match=f"alpha=0.01: {MAX_DRAWS} Dirichlet draws.*50 partitions"
    ):
        partition(labels, 50, "dirichlet", 0.01, seed=0)


def test_dirichlet_needs_positive_alpha() -> None:
    with pytest.raises(FedbenchError, match="alpha=0"):
        partition(LABELS, 2, "dirichlet", 0, seed=0)


def test_sampled_partitions_serve_fleets_larger_than_the_pool() -> None:
    labels = np.arange(1000) % 10
    parts = partition(labels, 100_000, scheme="sampled", alpha=0.5, seed=3, size=32)
    assert len(parts) == 100_000 and list(sizes(parts)[:3]) == [32, 32, 32]
    first = parts[99_999]
    assert first.dtype == np.int64 and len(set(first.tolist())) == 32  # no repeats in a device
    assert np.array_equal(
        first, partition(labels, 100_000, "sampled", 0.5, seed=3, size=32)[99_999]
    )
    assert not np.array_equal(parts[0], parts[1])  # devices differ
    with pytest.raises(FedbenchError, match=r"data.partition.size=None: the sampled scheme needs"):
        partition(labels, 10, scheme="sampled", alpha=0.5, seed=3)


def test_too_many_devices_for_a_disjoint_split_points_at_sampled() -> None:
    with pytest.raises(FedbenchError, match="data.partition.scheme=sampled"):
        partition(np.arange(20), 50, scheme="iid", alpha=0.5, seed=0)
