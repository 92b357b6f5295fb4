"""Finding and opening a data set for `data=hf`: a local folder or file, or a hub id.

What is opened, and how, is decided here from the files, never by running
them: a `save_to_disk` folder goes to `datasets.load_from_disk`; parquet,
csv and image files go to `datasets`' packaged builders by name
("parquet", "csv", "imagefolder"), so a stray loading script (`*.py`) in a
data folder is ignored; a LEAF JSON tree is left to `fedbench.data.leaf`.
Only a name that is not a local path is a hub id, loaded with
`datasets.load_dataset(id)` (datasets 4 refuses repositories with loading
scripts, and `trust_remote_code` is never passed).

Without a network `datasets` retries a hub request five times with back-off
(about 23 s measured for a missing id) before it falls back to its cache. A
one-second TCP probe of the hub decides first; when it fails, the call runs
in `datasets`' offline mode, which answers from the cache at once.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import datasets
import huggingface_hub.constants

from fedbench.data.leaf import is_leaf_tree
from fedbench.errors import FedbenchError

Kind = Literal["disk", "leaf", "parquet", "csv", "imagefolder", "hub"]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
# A hub id: "name" or "owner/name", letters, digits and -_. only.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_PROBE_SECONDS = 1.0


@dataclass(frozen=True)
class Located:
    """Where `name` was found: the kind of data and the local path (None for the hub)."""

    name: str
    kind: Kind
    path: Path | None


@dataclass(frozen=True)
class Opened:
    """A data set's train split and its own test split (None when it has none)."""

    train: datasets.Dataset
    test: datasets.Dataset | None


def locate(name: str, key: str = "data.name") -> Located:
    """What `name` is: an existing local path of a known layout, or else a hub id."""
    path = Path(os.path.expanduser(name)).absolute()
    if path.exists():
        return Located(name, _local_kind(path, key), path)
    if not _HUB_ID.match(name):
        raise FedbenchError(
            f"{key}={name!r}: no such file or folder ({path}), and not a Hugging Face hub "
            "id (owner/name)"
        )
    return Located(name, "hub", None)


_SUFFIXES: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "imagefolder": IMAGE_SUFFIXES,
}
_NOT_TRAIN = ("validation", "valid", "val", "dev")


def _local_kind(path: Path, key: str) -> Kind:
    """The layout of an existing local path, judged by its files' names only."""
    if path.is_file():
        if path.suffix.lower() == ".parquet":
            return "parquet"
        if path.suffix.lower() == ".csv":
            return "csv"
        raise FedbenchError(
            f"{key}={str(path)!r}: a {path.suffix or 'suffix-less'} file; valid: a .parquet "
            "or .csv file, or a folder (save_to_disk, parquet, csv, images, LEAF JSON)"
        )
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        return "disk"
    if is_leaf_tree(path):
        return "leaf"
    kinds: tuple[Kind, ...] = ("parquet", "csv", "imagefolder")
    for kind in kinds:
        if any(split_files(path, kind).values()):
            return kind
    raise FedbenchError(
        f"{key}={str(path)!r}: no data set in this folder (valid: a save_to_disk folder, "
        "parquet or csv files, images in class folders, or LEAF's train/*.json)"
    )


def split_files(path: Path, kind: Kind) -> dict[str, list[str]]:
    """The folder's files of `kind`, by split: "test" when a folder is named test or the
    file's name starts with it, none for validation/val/dev, else "train".

    Listed here rather than left to `datasets` (`data_dir=`), which reads every
    file of the folder with the builder: a stray script would be parsed as csv.
    """
    out: dict[str, list[str]] = {"train": [], "test": []}
    for file in sorted(path.rglob("*")):
        if not file.is_file() or file.suffix.lower() not in _SUFFIXES.get(kind, ()):
            continue
        parts = [p.lower() for p in file.relative_to(path).parts]
        names = [*parts[:-1], Path(parts[-1]).stem.split("-")[0].split("_")[0]]
        if any(n in _NOT_TRAIN for n in names):
            continue
        out["test" if "test" in names else "train"].append(str(file))
    return out


def open_located(where: Located, cache_dir: str | None = None) -> Opened:
    """The train and test splits of a located (non-LEAF) data set."""
    if where.kind == "hub":
        return splits(load_hub(where.name, cache_dir), where.name)
    if where.path is None or where.kind == "leaf":
        raise ValueError(f"{where.kind} data is not opened through datasets")
    if where.kind == "disk":
        return splits(datasets.load_from_disk(str(where.path)), where.name)
    if where.path.is_file():
        files = {"train": [str(where.path)]}
    else:
        files = {k: v for k, v in split_files(where.path, where.kind).items() if v}
    try:
        loaded = datasets.load_dataset(where.kind, data_files=files, cache_dir=cache_dir)
    except datasets.exceptions.DatasetGenerationError as e:
        cause = str(e.__cause__ or e).strip().splitlines()[0]
        raise FedbenchError(f"data.name={where.name!r}: cannot read its files: {cause}") from e
    return splits(loaded, where.name)


def splits(loaded: Any, name: str, key: str = "data.name") -> Opened:
    """The "train" split (or the only one) and the "test" split, when present."""
    if isinstance(loaded, datasets.Dataset):
        return Opened(loaded, None)
    if not isinstance(loaded, datasets.DatasetDict):
        raise FedbenchError(f"{key}={name!r}: {type(loaded).__name__} is not a data set")
    names = list(loaded)
    if "train" in loaded:
        train = loaded["train"]
    elif len(names) == 1:
        train = loaded[names[0]]
    else:
        raise FedbenchError(
            f"{key}={name!r}: no 'train' split (splits: {', '.join(names)}); save the one to "
            "use as 'train' (and 'test')"
        )
    return Opened(train, loaded["test"] if "test" in loaded and names != ["test"] else None)


def load_hub(name: str, cache_dir: str | None) -> Any:
    """`datasets.load_dataset(name)`, offline when the hub is unreachable; one-line errors."""
    offline = bool(datasets.config.HF_HUB_OFFLINE) or not hub_reachable()
    try:
        with _offline(offline):
            return datasets.load_dataset(name, cache_dir=cache_dir)
    except (ConnectionError, FileNotFoundError) as e:
        raise FedbenchError(_not_found(name, cache_dir, offline)) from e
    except RuntimeError as e:  # e.g. "Dataset scripts are no longer supported"
        raise FedbenchError(f"data.name={name!r}: datasets cannot load it: {e}") from e


def hub_reachable(timeout: float = _PROBE_SECONDS) -> bool:
    """Whether a TCP connection to the hub's host opens within `timeout` seconds."""
    endpoint = urlparse(str(datasets.config.HF_ENDPOINT))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextmanager
def _offline(offline: bool) -> Iterator[None]:
    """`datasets`' and the hub client's offline switches, set for one call and restored.

    Both libraries read HF_HUB_OFFLINE from the environment when imported, so
    setting the variable now would change nothing; their flags are set instead.
    """
    saved = (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    if offline:
        datasets.config.HF_HUB_OFFLINE = True
        huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


def _not_found(name: str, cache_dir: str | None, offline: bool) -> str:
    """The one line for a data set that is neither local nor cached (nor downloadable)."""
    local = Path(os.path.expanduser(name)).absolute()
    cache = Path(os.path.expanduser(cache_dir or str(datasets.config.HF_DATASETS_CACHE)))
    state = "offline, so only the cache was searched" if offline else "not found on the hub"
    return (
        f"data.name={name!r}: data set not found: no local path {local}, and not in the "
        f"Hugging Face cache {cache} ({state}). On a machine with a network run "
        f"`python -c \"import datasets; datasets.load_dataset('{name}')\"` and copy its "
        "cache here (HF_HOME sets where it is), or save it with "
        f"`datasets.load_dataset('{name}').save_to_disk(FOLDER)` and give data.name=FOLDER"
    )
