"""Partition the device pool across devices: Flower Datasets' partitioners, or sampled.

- Every horizontal partitioner of Flower Datasets (`flwr-datasets`: iid,
  dirichlet, inner_dirichlet, pathological, shard, natural_id,
  grouped_natural_id, size, linear, square, exponential, continuous,
  distribution) is a scheme, drawn by the library itself
  (`partitioners.draw`); its parameters are keys of `data.partition`.
  `natural_id` gives one device per owner of the data (a writer, a role, a
  speaker), so the fleet must have as many devices as the data has owners.
- "sampled" (fedbench's own: the library has no equivalent) is for fleets
  larger than the data (100,000 phones over a pool of a thousand images):
  each device holds `size` examples drawn without replacement from the
  whole pool, seeded by (seed, device): devices overlap, as FedScale's
  clients over a shared data set do. A device's indices are drawn when it
  is first asked for, so a fleet costs no memory up front.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, overload

import numpy as np

import fedbench.data.partition_cache as partition_cache
import fedbench.data.partitioners as partitioners
from fedbench.errors import FedbenchError


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


SAMPLED = "sampled"


def _sampled(n: int, num_partitions: int, size: int | None, seed: int) -> SampledPartitions:
    if size is None or not 1 <= size <= n:
        raise FedbenchError(
            f"data.partition.size={size!r}: the sampled scheme needs 1..{n} examples per "
            "device (the device pool's size)"
        )
    return SampledPartitions(n, num_partitions, size, seed)


def partition(
    labels: np.ndarray,
    num_partitions: int,
    scheme: str,
    seed: int,
    params: Mapping[str, Any] | None = None,
    ids: np.ndarray | None = None,
    size: int | None = None,
) -> Sequence[np.ndarray]:
    """Index arrays (sorted, int64) into the pool's `labels`, one per device.

    Parameters
    ----------
    labels:
        The device pool's labels, one per example.
    num_partitions:
        Devices in the fleet.
    scheme:
        A Flower Datasets partitioner's scheme name, or "sampled".
    seed:
        The experiment's seed: the same arguments give the same partitions in
        any process.
    params:
        The scheme's parameters (`data.partition` less `scheme` and `size`);
        None values mean the library's defaults.
    ids:
        Each example's natural owner, for the natural_id schemes; None when
        the data has no owners.
    size:
        "sampled" only: the examples each device holds.
    """
    labels = np.asarray(labels)
    n = int(labels.size)
    if scheme == SAMPLED:
        return _sampled(n, num_partitions, size, seed)
    if size is not None:
        raise FedbenchError(
            f"data.partition.size={size}: the sampled scheme's parameter, not {scheme}'s; "
            "set it to null"
        )
    if not 1 <= num_partitions <= n:
        raise FedbenchError(
            f"num_partitions={num_partitions} (devices in the fleet): must be between 1 and "
            f"the {n} examples of the device pool; for more devices than examples use "
            "data.partition.scheme=sampled (each device holds data.partition.size examples "
            "drawn from the pool)"
        )
    owners = None if ids is None else np.asarray(ids)
    settings = dict(params or {})
    parts = partition_cache.cached(
        partition_cache.key(labels, owners, num_partitions, scheme, settings, seed),
        num_partitions,
        n,
        lambda: partitioners.draw(
            labels, owners, num_partitions, scheme, settings, seed, extra=(SAMPLED,)
        ),
    )
    _check_none_empty(parts, scheme, n)
    return parts


def _check_none_empty(parts: Sequence[np.ndarray], scheme: str, pool_size: int) -> None:
    """A device without examples has nothing to stream: refused, not run."""
    empty = [i for i, p in enumerate(parts) if p.size == 0]
    if empty:
        raise FedbenchError(
            f"data.partition.scheme={scheme}: {len(empty)} of {len(parts)} devices get no "
            f"examples of the {pool_size} in the pool (device {empty[0]} first); use fewer "
            "devices or parameters that spread the data more evenly"
        )
