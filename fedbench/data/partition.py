"""Partition the device pool across devices: IID, label-skewed (Dirichlet), or sampled.

- "iid": a seeded shuffle cut into near-equal parts (sizes differ by <= 1).
- "dirichlet": for every class, proportions p ~ Dir(alpha * 1) over the
  partitions and the class's examples are cut at those proportions (the
  scheme of Hsu et al. 2019, used by NIID-Bench and Flower Datasets). Small
  alpha gives each device few classes; large alpha approaches IID. Draws are
  repeated until every partition holds at least `min_size` examples.
- "sampled": for fleets larger than the data (100,000 phones over a pool of
  a thousand images), each device holds `size` examples drawn without
  replacement from the whole pool, seeded by (seed, device): devices
  overlap, as FedScale's clients over a shared data set do. A device's
  indices are drawn when it is first asked for, so a fleet costs no memory
  up front.

Schemes are looked up in `SCHEMES`, so adding one is adding a function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import overload

import numpy as np

from fedbench.errors import FedbenchError, choices

# Enough redraws for any setting that succeeds with fair probability; when even
# this many fail, the setting is effectively impossible and the user must act.
MAX_DRAWS = 1000


def _iid(
    labels: np.ndarray, num_partitions: int, alpha: float, min_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    return list(np.array_split(rng.permutation(labels.size), num_partitions))


def _dirichlet_once(
    labels: np.ndarray, num_partitions: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    parts: list[list[np.ndarray]] = [[] for _ in range(num_partitions)]
    for cls in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cls))
        shares = rng.dirichlet(np.full(num_partitions, alpha))
        cuts = (np.cumsum(shares)[:-1] * members.size).astype(np.int64)
        for part, chunk in zip(parts, np.split(members, cuts), strict=True):
            part.append(chunk)
    return [np.concatenate(p) for p in parts]


def _dirichlet(
    labels: np.ndarray, num_partitions: int, alpha: float, min_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    if not alpha > 0:
        raise FedbenchError(f"data.partition.alpha={alpha}: must be > 0 for the dirichlet scheme")
    for _ in range(MAX_DRAWS):
        parts = _dirichlet_once(labels, num_partitions, alpha, rng)
        if min(p.size for p in parts) >= min_size:
            return parts
    raise FedbenchError(
        f"data.partition.alpha={alpha}: {MAX_DRAWS} Dirichlet draws over {labels.size} examples "
        f"never gave all {num_partitions} partitions >= {min_size} examples; raise alpha, "
        f"use fewer devices or use scheme iid"
    )


class SampledPartitions(Sequence[np.ndarray]):
    """Each device's `size` examples of the pool, drawn on demand, seeded by (seed, device)."""

    def __init__(self, pool_size: int, num_partitions: int, size: int, seed: int) -> None:
        self.pool_size = pool_size
        self.num_partitions = num_partitions
        self.size = size
        self.seed = seed

    def __len__(self) -> int:
        return self.num_partitions

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[np.ndarray]: ...
    def __getitem__(self, i: int | slice) -> np.ndarray | Sequence[np.ndarray]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.num_partitions))]
        if not -self.num_partitions <= i < self.num_partitions:
            raise IndexError(i)
        return self._draw(i % self.num_partitions)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - bounded; one sequence per data context
    def _draw(self, device: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, device, 0x5A3])
        return np.sort(rng.choice(self.pool_size, size=self.size, replace=False)).astype(np.int64)


def sizes(parts: Sequence[np.ndarray]) -> np.ndarray:
    """How many examples each partition holds (without drawing sampled ones)."""
    if isinstance(parts, SampledPartitions):
        return np.full(len(parts), parts.size, dtype=np.int64)
    return np.array([len(p) for p in parts], dtype=np.int64)


Scheme = Callable[[np.ndarray, int, float, int, np.random.Generator], list[np.ndarray]]
SCHEMES: dict[str, Scheme] = {"iid": _iid, "dirichlet": _dirichlet}
SAMPLED = "sampled"


def partition(
    labels: np.ndarray,
    num_partitions: int,
    scheme: str,
    alpha: float,
    seed: int,
    min_size: int = 1,
    size: int | None = None,
) -> Sequence[np.ndarray]:
    """Index arrays (sorted, int64) into `labels`, one per partition.

    iid and dirichlet partitions are disjoint and cover the pool; sampled
    ones (`size` examples each) overlap. `alpha` is used by "dirichlet" only.
    Seeded: the same arguments give the same partitions in any process.
    """
    labels = np.asarray(labels)
    n = int(labels.size)
    if scheme == SAMPLED:
        if size is None or not 1 <= size <= n:
            raise FedbenchError(
                f"data.partition.size={size!r}: the sampled scheme needs 1..{n} examples per "
                "device (the device pool's size)"
            )
        return SampledPartitions(n, num_partitions, size, seed)
    if scheme not in SCHEMES:
        raise FedbenchError(
            f"data.partition.scheme={scheme!r}: unknown (valid: {choices([*SCHEMES, SAMPLED])})"
        )
    if not 1 <= num_partitions <= n:
        raise FedbenchError(
            f"num_partitions={num_partitions} (devices in the fleet): must be between 1 and "
            f"the {n} examples of the device pool; for more devices than examples use "
            "data.partition.scheme=sampled (each device holds data.partition.size examples "
            "drawn from the pool)"
        )
    if min_size < 1 or num_partitions * min_size > n:
        raise FedbenchError(
            f"min_size={min_size} with num_partitions={num_partitions}: needs "
            f"{num_partitions * max(min_size, 1)} examples, the device pool has {n} "
            f"(min_size must be >= 1)"
        )
    rng = np.random.default_rng(seed)
    parts = SCHEMES[scheme](labels, num_partitions, alpha, min_size, rng)
    return [np.sort(p).astype(np.int64) for p in parts]
