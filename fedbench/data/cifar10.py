"""CIFAR-10 from the official python-version batch files.

Reads `<root>/cifar-10-batches-py/{data_batch_1..5,test_batch}`: pickled dicts
with b"data" (uint8, N x 3072, channel-major 3x32x32) and b"labels". When the
files are missing and `download` is true, fetches the official archive once,
checks its MD5 and extracts it under `root`; an archive already placed in
`root` by hand is checked and extracted without any network.

The batches are unpickled with an allow-list of the few globals the official
files reference (numpy array reconstruction), so a stray or tampered file in
the data folder cannot run code.
"""

from __future__ import annotations

import codecs
import hashlib
import pickle
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np
import torch

from fedbench.data.source import (
    DataSource,
    Tensors,
    data_root,
    image_shape,
    standardise,
    to_input_shape,
)
from fedbench.errors import FedbenchError

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
ARCHIVE = "cifar-10-python.tar.gz"
ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
FOLDER = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
NUM_CLASSES = 10
_PIXELS = 3 * 32 * 32


def _download(url: str, dest: Path) -> None:
    """Fetch `url` into `dest`. A module function so tests can replace it."""
    with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out)


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _numpy_reconstruct() -> Any:
    # numpy 2 moved numpy.core to numpy._core; old pickles name the former.
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
    return _reconstruct


class _BatchUnpickler(pickle.Unpickler):
    """Resolves only the globals an official CIFAR-10 batch references."""

    _ALLOWED: ClassVar[dict[tuple[str, str], Any]] = {
        ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),
        ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        # Python 3 protocol-2 pickles spell bytes as _codecs.encode(str, "latin1").
        ("_codecs", "encode"): codecs.encode,
    }

    def __init__(self, file: BinaryIO) -> None:
        # The official files are Python 2 pickles: their str payloads are bytes.
        super().__init__(file, encoding="bytes")

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"unexpected global {module}.{name}") from None


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8 N x 3072, labels int64 N) of one batch file, validated."""

    def corrupt(why: str) -> FedbenchError:
        return FedbenchError(
            f"CIFAR-10 batch file {path} is corrupt or truncated ({why}); delete the "
            f"folder {path.parent} and extract {ARCHIVE} again (md5 {ARCHIVE_MD5})"
        )

    try:
        with open(path, "rb") as f:
            batch = _BatchUnpickler(f).load()
    except OSError as e:
        raise corrupt(f"cannot read: {e}") from e
    # A damaged pickle can fail in many ways (EOFError, UnpicklingError, errors
    # from numpy rebuilding a short buffer); all mean the same to the user.
    except Exception as e:
        raise corrupt(f"{type(e).__name__}: {e}") from e
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise corrupt('not a dict with keys b"data" and b"labels"')
    data, labels = batch[b"data"], batch[b"labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2:
        raise corrupt('b"data" is not a 2-D uint8 array')
    if data.shape[1] != _PIXELS:
        raise corrupt(f'b"data" rows have {data.shape[1]} values, expected {_PIXELS}')
    try:
        y = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError) as e:
        raise corrupt(f'b"labels" are not integers: {e}') from e
    if y.shape != (data.shape[0],):
        raise corrupt(f'{data.shape[0]} images but b"labels" has shape {y.shape}')
    if y.size and (y.min() < 0 or y.max() >= NUM_CLASSES):
        raise corrupt(f"labels outside 0..{NUM_CLASSES - 1}")
    # Arrays rebuilt from a pickle's bytes are read-only; torch wants writable.
    return np.require(data, requirements=["C", "W"]), y


@dataclass(frozen=True)
class Cifar10Source(DataSource):
    """CIFAR-10: 50,000 train and 10,000 official test images, 32x32 colour."""

    root: str
    download: bool = False

    name: ClassVar[str] = "cifar10"
    num_classes: ClassVar[int] = NUM_CLASSES

    @property
    def root_path(self) -> Path:
        return data_root(self.root)

    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        shape = image_shape(input_shape, self.name)
        folder = self.ensure_files()
        batches = [read_batch(folder / name) for name in TRAIN_FILES]
        train_y = torch.from_numpy(np.concatenate([y for _, y in batches]))
        train_data = np.concatenate([d for d, _ in batches])
        del batches  # the uint8 copies are dead weight next to the float images
        train_x = _images(train_data, shape)
        del train_data
        test_data, test_y = read_batch(folder / TEST_FILE)
        train_x, test_x = standardise(train_x, _images(test_data, shape))
        return Tensors(train_x, train_y), Tensors(test_x, torch.from_numpy(test_y))

    def ensure_files(self) -> Path:
        """The batch folder, extracted (and downloaded if allowed) when missing."""
        root = self.root_path
        existing = next(p for p in (root, *root.parents) if p.exists())
        if not existing.is_dir():
            raise FedbenchError(
                f"data.source.root={self.root!r}: {existing} is a file, not a folder; give the "
                "folder that holds (or will hold) cifar-10-batches-py/ - FEDBENCH_DATA sets it"
            )
        folder = root / FOLDER
        if self._missing(folder):
            archive = root / ARCHIVE
            if not archive.is_file():
                if not self.download:
                    raise self._not_found("data.source.download is false")
                self._fetch(archive)
            self._extract(archive)
            if self._missing(folder):
                raise self._not_found(f"{archive} did not contain them")
        return folder

    @staticmethod
    def _missing(folder: Path) -> list[str]:
        return [n for n in (*TRAIN_FILES, TEST_FILE) if not (folder / n).is_file()]

    def _not_found(self, why: str) -> FedbenchError:
        root = self.root_path
        return FedbenchError(
            f"CIFAR-10 not found ({why}): data.source.root={self.root!r} resolves to {root}, "
            f"which must hold {FOLDER}/{{{','.join(TRAIN_FILES)},{TEST_FILE}}}. Get them with "
            f"data.source.download=true, or download {URL} (md5 {ARCHIVE_MD5}) and run "
            f"`tar xzf {ARCHIVE} -C {root}`; FEDBENCH_DATA sets another root"
        )

    def _fetch(self, archive: Path) -> None:
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_name(archive.name + ".part")
        try:
            _download(URL, partial)
        except OSError as e:  # URLError, timeouts and disk errors are all OSErrors
            partial.unlink(missing_ok=True)
            raise self._not_found(f"download of {URL} failed: {e}") from e
        partial.replace(archive)

    def _extract(self, archive: Path) -> None:
        # Checked here, not only after downloading, so an archive copied in by
        # hand is verified too; a bad one is removed so a retry fetches afresh.
        digest = md5_of(archive)
        if digest != ARCHIVE_MD5:
            archive.unlink()
            raise self._not_found(
                f"{archive} has md5 {digest}, expected {ARCHIVE_MD5}; the file was removed"
            )
        try:
            with tarfile.open(archive, "r:gz") as tar:
                tar.extractall(self.root_path, filter="data")
        except (tarfile.TarError, OSError) as e:
            raise self._not_found(f"cannot extract {archive}: {e}") from e


def _images(data: np.ndarray, input_shape: tuple[int, int, int]) -> torch.Tensor:
    """uint8 rows (N, 3072) -> float images in [0, 1] at `input_shape`."""
    x = torch.from_numpy(data).view(-1, 3, 32, 32).to(torch.float32).div_(255.0)
    return to_input_shape(x, input_shape)
