"""Nested mappings as dotted keys: a config's `{train: {lr: 0.01}}` is `train.lr`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of nested mappings under its dotted key (lists are leaves)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}
