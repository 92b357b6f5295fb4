"""Partition the device pool across devices: IID or label-skewed (Dirichlet).

- "iid": a seeded shuffle cut into near-equal parts (sizes differ by <= 1).
- "dirichlet": for every class, proportions p ~ Dir(alpha * 1) over the
  partitions and the class's examples are cut at those proportions (the
  scheme of Hsu et al. 2019, used by NIID-Bench and Flower Datasets). Small
  alpha gives each device few classes; large alpha approaches IID. Draws are
  repeated until every partition holds at least `min_size` examples.

Schemes are looked up in `SCHEMES`, so adding one is adding a function.
"""

from __future__ import annotations

from collections.abc import Callable

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


Scheme = Callable[[np.ndarray, int, float, int, np.random.Generator], list[np.ndarray]]
SCHEMES: dict[str, Scheme] = {"iid": _iid, "dirichlet": _dirichlet}


def partition(
    labels: np.ndarray,
    num_partitions: int,
    scheme: str,
    alpha: float,
    seed: int,
    min_size: int = 1,
) -> list[np.ndarray]:
    """Disjoint index arrays (sorted, int64) covering `labels`, one per partition.

    `alpha` is used by "dirichlet" only. Seeded: the same arguments give the
    same partitions in any process.
    """
    labels = np.asarray(labels)
    if scheme not in SCHEMES:
        raise FedbenchError(
            f"data.partition.scheme={scheme!r}: unknown (valid: {choices(SCHEMES)})"
        )
    n = int(labels.size)
    if not 1 <= num_partitions <= n:
        raise FedbenchError(
            f"num_partitions={num_partitions} (devices in the fleet): must be between 1 and "
            f"the {n} examples of the device pool"
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
