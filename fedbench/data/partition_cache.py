"""Drawn partitions kept on disk, so one process draws them and the others read them.

Every process of a run (the server, each simulation worker, each deployed
SuperNode) derives the same partitions from the experiment. Drawing them
means importing Flower Datasets (about 2 s and 200 MB per process) and, for
thousands of devices, a library call per device; reading them back is an
`np.load`. The key hashes everything a draw depends on: the pool's labels
and owners, the fleet's size, the scheme and its parameters, the seed and
the flwr-datasets version.

Files live under `cache_dir()/partitions/<key>.npz`, written atomically. A
file is data, loaded with `allow_pickle=False`; one that does not describe
`num_partitions` sorted, in-range index arrays is ignored and redrawn.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.paths import cache_dir

# Bump when the way partitions are drawn changes, so old files are not read.
FORMAT = 1


def key(
    labels: np.ndarray,
    ids: np.ndarray | None,
    num_partitions: int,
    scheme: str,
    params: Mapping[str, Any],
    seed: int,
) -> str:
    """The cache key of one draw."""
    digest = hashlib.sha256(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    if ids is not None:
        digest.update(b"ids")
        digest.update(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
    payload = {
        "data": digest.hexdigest(),
        "num_partitions": num_partitions,
        "scheme": scheme,
        "params": {k: v for k, v in sorted(params.items()) if v is not None},
        "seed": seed,
        "flwr_datasets": metadata.version("flwr-datasets"),
        "format": FORMAT,
    }
    encoded = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:32]


def _path(name: str) -> Path:
    return cache_dir() / "partitions" / f"{name}.npz"


def load(name: str, num_partitions: int, pool_size: int) -> list[np.ndarray] | None:
    """The partitions stored under `name`, or None when absent or not a valid draw."""
    try:
        with np.load(_path(name), allow_pickle=False) as f:
            offsets, indices = f["offsets"], f["indices"]
    except (OSError, KeyError, ValueError):
        return None
    valid = (
        offsets.dtype == np.int64
        and indices.dtype == np.int64
        and offsets.shape == (num_partitions + 1,)
        and offsets[0] == 0
        and offsets[-1] == indices.size
        and bool(np.all(np.diff(offsets) >= 0))
        and (indices.size == 0 or (indices.min() >= 0 and indices.max() < pool_size))
    )
    if not valid:
        return None
    return [indices[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def store(name: str, parts: list[np.ndarray]) -> None:
    """Write `parts` under `name`; a cache that cannot be written is skipped."""
    path = _path(name)
    offsets = np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64)
    indices = np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".npz")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, offsets=offsets, indices=indices)
        os.replace(tmp, path)
    except OSError:
        return  # read-only or full: every process then draws for itself


def cached(
    name: str, num_partitions: int, pool_size: int, draw: Callable[[], list[np.ndarray]]
) -> list[np.ndarray]:
    """The partitions under `name`, drawn with `draw()` and stored when not there yet."""
    parts = load(name, num_partitions, pool_size)
    if parts is None:
        parts = draw()
        store(name, parts)
    return parts
