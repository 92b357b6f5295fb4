"""Cache of workload measurements: in-process and JSON files.

A measurement is a deterministic function of the model's structure, the
step's arguments and the torch version, so the cache key hashes exactly
those. Files live under `cache_dir()/workloads/<key>.json`, one per
measurement, written atomically because parallel clients (Ray workers)
may measure the same workload at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fedbench.paths import cache_dir

# Bump when the measurement changes, so stale files are not read back.
MEASUREMENT_VERSION = 12  # 4: per-call table; 9: pooling windows; 11: op, taps; 12: RNN, embedding


def model_fingerprint(model: nn.Module) -> str:
    """Hash of the module tree, parameter/buffer shapes and dtypes and which train."""
    parts = [repr(model)]
    for name, p in model.named_parameters():
        parts.append(f"p {name} {tuple(p.shape)} {p.dtype}")
    for name, b in model.named_buffers():
        parts.append(f"b {name} {tuple(b.shape)} {b.dtype}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cache_key(model: nn.Module, args: Mapping[str, object]) -> str:
    """Key of one measurement: model fingerprint, step arguments, versions."""
    payload = {
        "fingerprint": model_fingerprint(model),
        "args": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(args.items())},
        "torch": torch.__version__,
        "version": MEASUREMENT_VERSION,
    }
    # default=str: a torch.dtype argument keys by its name.
    encoded = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:32]


def _path(key: str) -> Path:
    return cache_dir() / "workloads" / f"{key}.json"


def load(key: str) -> dict[str, Any] | None:
    path = _path(key)
    try:
        with path.open() as f:
            data: dict[str, Any] = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        # A torn or foreign file is re-measured and overwritten.
        return None
    return data


def store(key: str, data: Mapping[str, Any]) -> Path:
    path = _path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path
