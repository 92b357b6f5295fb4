from __future__ import annotations

import hashlib
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.data import cifar10
from fedbench.data.cifar10 import Cifar10Source, read_batch
from fedbench.data.cifar10_files import write_cifar10_like
from fedbench.errors import FedbenchError

N_TRAIN, N_TEST = 20, 30


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    write_cifar10_like(tmp_path, N_TRAIN, N_TEST, seed=0)
    return tmp_path


def _archive_of(files_root: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(files_root / cifar10.FOLDER, arcname=cifar10.FOLDER)
    return dest


def test_official_constants() -> None:
    assert cifar10.URL == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    assert cifar10.ARCHIVE_MD5 == "c58f30108f718f92721af3b95e74349a"


def test_generated_files_have_the_official_layout(root: Path) -> None:
    folder = root / cifar10.FOLDER
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([*cifar10.TRAIN_FILES, cifar10.TEST_FILE, "batches.meta"])
    with open(folder / "data_batch_2", "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (N_TRAIN, 3072)
    with open(folder / "batches.meta", "rb") as f:
        assert len(pickle.load(f, encoding="bytes")[b"label_names"]) == 10


def test_load_matches_the_files(root: Path) -> None:
    train, test = Cifar10Source(str(root), download=False).load((3, 32, 32))
    assert len(train) == 5 * N_TRAIN and len(test) == N_TEST
    batches = [read_batch(root / cifar10.FOLDER / n) for n in cifar10.TRAIN_FILES]
    labels = np.concatenate([y for _, y in batches])
    assert train.y.tolist() == labels.tolist()
    # Rows are channel-major 3x32x32; standardised with the train statistics.
    raw = torch.from_numpy(np.concatenate([d for d, _ in batches])).view(-1, 3, 32, 32) / 255.0
    mean = raw.mean(dim=(0, 2, 3), keepdim=True)
    std = raw.std(dim=(0, 2, 3), keepdim=True)
    assert torch.allclose(train.x, (raw - mean) / std, atol=1e-5)
    test_raw = read_batch(root / cifar10.FOLDER / cifar10.TEST_FILE)[0]
    expected_test = (torch.from_numpy(test_raw).view(-1, 3, 32, 32) / 255.0 - mean) / std
    assert torch.allclose(test.x, expected_test, atol=1e-5)


def test_load_converts_to_grey_and_size(root: Path) -> None:
    train, test = Cifar10Source(str(root), download=False).load((1, 16, 16))
    assert train.x.shape == (5 * N_TRAIN, 1, 16, 16) and test.x.shape == (N_TEST, 1, 16, 16)


def test_missing_files_name_the_key_path_files_and_remedy(tmp_path: Path) -> None:
    source = Cifar10Source(str(tmp_path / "nowhere"), download=False)
    with pytest.raises(FedbenchError) as err:
        source.load((3, 32, 32))
    msg = str(err.value)
    for part in ("data.source.root", str(tmp_path / "nowhere"), "data_batch_1", "test_batch"):
        assert part in msg
    assert cifar10.URL in msg and "download=true" in msg


def test_one_missing_batch_is_reported(root: Path) -> None:
    (root / cifar10.FOLDER / "data_batch_4").unlink()
    with pytest.raises(FedbenchError, match="data.source.root"):
        Cifar10Source(str(root), download=False).load((3, 32, 32))


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Cifar10Source("~/data").root_path == tmp_path / "data"


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
        pytest.param(lambda b: b"not a pickle at all", id="garbage"),
        pytest.param(lambda b: pickle.dumps([1, 2, 3], protocol=2), id="wrong-structure"),
        pytest.param(
            lambda b: pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}),
            id="wrong-width",
        ),
        pytest.param(
            lambda b: pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 11]}),
            id="bad-label",
        ),
        pytest.param(lambda b: b"cbuiltins\neval\n(S'1'\ntR.", id="foreign-global"),
    ],
)
def test_corrupt_batch_names_the_file(root: Path, damage: object) -> None:
    path = root / cifar10.FOLDER / "data_batch_3"
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    with pytest.raises(FedbenchError, match="data_batch_3") as err:
        Cifar10Source(str(root), download=False).load((3, 32, 32))
    assert "corrupt" in str(err.value)


def test_download_verifies_and_extracts(
    root: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = _archive_of(root, tmp_path_factory.mktemp("src") / "a.tar.gz")
    calls: list[str] = []

    def fake_download(url: str, dest: Path) -> None:
        calls.append(url)
        dest.write_bytes(archive.read_bytes())

    monkeypatch.setattr(cifar10, "_download", fake_download)
    monkeypatch.setattr(cifar10, "ARCHIVE_MD5", hashlib.md5(archive.read_bytes()).hexdigest())
    target = tmp_path_factory.mktemp("fresh")
    train, test = Cifar10Source(str(target), download=True).load((3, 32, 32))
    assert calls == [cifar10.URL]
    assert len(train) == 5 * N_TRAIN and len(test) == N_TEST
    assert not (target / (cifar10.ARCHIVE + ".part")).exists()
    # Present now: a second load must not download again.
    Cifar10Source(str(target), download=True).load((3, 32, 32))
    assert calls == [cifar10.URL]


def test_checksum_mismatch_is_refused_and_removed(
    root: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = _archive_of(root, tmp_path_factory.mktemp("src") / "a.tar.gz")
    monkeypatch.setattr(
        cifar10, "_download", lambda url, dest: dest.write_bytes(archive.read_bytes())
    )
    target = tmp_path_factory.mktemp("fresh")
    with pytest.raises(FedbenchError, match="expected c58f30108f718f92721af3b95e74349a"):
        Cifar10Source(str(target), download=True).load((3, 32, 32))
    assert not (target / cifar10.ARCHIVE).exists()
    assert not (target / cifar10.FOLDER).exists()


def test_no_network_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(url: str, dest: Path) -> None:
        dest.write_bytes(b"partial")
        raise OSError("Temporary failure in name resolution")

    monkeypatch.setattr(cifar10, "_download", offline)
    with pytest.raises(FedbenchError, match="download of .* failed") as err:
        Cifar10Source(str(tmp_path), download=True).load((3, 32, 32))
    assert "data.source.root" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no partial file left behind


def test_archive_placed_by_hand_is_used_without_download(
    root: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path_factory.mktemp("manual")
    archive = _archive_of(root, target / cifar10.ARCHIVE)
    monkeypatch.setattr(cifar10, "ARCHIVE_MD5", hashlib.md5(archive.read_bytes()).hexdigest())

    def no_network(url: str, dest: Path) -> None:
        raise AssertionError("must not download")

    monkeypatch.setattr(cifar10, "_download", no_network)
    train, _ = Cifar10Source(str(target), download=False).load((3, 32, 32))
    assert len(train) == 5 * N_TRAIN
