"""LEAF's JSON tree: the one reader for FEMNIST, Shakespeare, Sent140 and kin.

LEAF (github.com/TalwalkarLab/leaf) writes each data set as
`<root>/train/*.json` and `<root>/test/*.json`, every file one shard of users::

    {"users": ["f0000_14", ...], "num_samples": [181, ...],
     "user_data": {"f0000_14": {"x": [...], "y": [...]}, ...}}

`x` is whatever the data set holds per example (784 floats for a FEMNIST
image, an 80-character string for Shakespeare) and `y` its label; this
module only checks the structure and flattens it into examples with their
owner, leaving what `x` means to the caller. Files are read with `json`, so
opening a tree never runs code from it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError

SPLITS = ("train", "test")
# What `datasets.save_to_disk` writes into a split folder: JSON, but not LEAF's.
_NOT_LEAF = ("dataset_info.json", "state.json")


@dataclass(frozen=True)
class LeafSplit:
    """One split's examples in file order: inputs, labels and each example's user."""

    x: list[Any]
    y: list[Any]
    users: list[str]

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class LeafTree:
    """A LEAF data set: train and test (test empty when the tree has no test/ files)."""

    root: Path
    train: LeafSplit
    test: LeafSplit


def is_leaf_tree(root: Path) -> bool:
    """Whether `root` looks like a LEAF tree: a train/ folder holding LEAF .json files."""
    return bool(leaf_files(root / "train"))


def leaf_files(folder: Path) -> list[Path]:
    """The LEAF shards in one split folder, sorted (none when it does not exist)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if p.name not in _NOT_LEAF)


def read_leaf_tree(root: Path) -> LeafTree:
    """Both splits of the tree at `root`; a missing or malformed file is one FedbenchError."""
    if not is_leaf_tree(root):
        raise FedbenchError(
            f"{root}: not a LEAF data set (expected {root}/train/*.json and optionally "
            f"{root}/test/*.json, as LEAF's preprocess.sh writes them)"
        )
    train = read_leaf_split(leaf_files(root / "train"))
    test = read_leaf_split(leaf_files(root / "test"))
    return LeafTree(root, train, test)


def read_leaf_split(files: Sequence[Path]) -> LeafSplit:
    """All examples of `files` (one split's shards), user by user in each file's order."""
    x: list[Any] = []
    y: list[Any] = []
    users: list[str] = []
    for path in files:
        for user, data in _user_data(path):
            x.extend(data["x"])
            y.extend(data["y"])
            users.extend([user] * len(data["y"]))
    return LeafSplit(x, y, users)


def _user_data(path: Path) -> list[tuple[str, dict[str, list[Any]]]]:
    """(user, {"x", "y"}) for each user listed in one LEAF file, validated."""

    def bad(why: str) -> FedbenchError:
        return FedbenchError(
            f"LEAF file {path}: {why} (expected {{'users': [...], 'num_samples': [...], "
            "'user_data': {user: {'x': [...], 'y': [...]}}}})"
        )

    try:
        with open(path, encoding="utf-8") as f:
            shard = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"cannot read it as JSON: {e}") from None
    if not isinstance(shard, dict) or not isinstance(shard.get("user_data"), dict):
        raise bad("no 'user_data' mapping")
    user_data = shard["user_data"]
    # "users" fixes the order; old LEAF files without it are read in mapping order.
    users = shard.get("users", list(user_data))
    if not isinstance(users, list):
        raise bad("'users' is not a list")
    out = []
    for user in users:
        data = user_data.get(user)
        if not isinstance(data, dict):
            raise bad(f"user {user!r} is listed but has no entry in 'user_data'")
        xs, ys = data.get("x"), data.get("y")
        if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys):
            raise bad(f"user {user!r}: 'x' and 'y' must be lists of equal length")
        out.append((str(user), data))
    return out
