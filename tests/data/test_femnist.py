"""data=femnist in both layouts, on small files written in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from omegaconf import DictConfig, OmegaConf
from PIL import Image

from fedbench.data import build_source
from fedbench.data.femnist import FemnistSource
from fedbench.errors import FedbenchError
from fedbench.paths import conf_dir

# writer -> (pixel value in [0, 1], labels) for train; test holds one image per writer.
TRAIN = {"f0002_10": (0.2, [0, 61, 5]), "f0000_03": (0.9, [61]), "f0001_44": (0.5, [7, 7])}
TEST = {"f0001_44": (0.4, [7]), "f0002_10": (0.1, [0])}
WRITERS = sorted(TRAIN)


def _leaf(root: Path) -> Path:
    for split, users in (("train", TRAIN), ("test", TEST)):
        (root / split).mkdir(parents=True)
        user_data = {
            u: {"x": [[value] * 784 for _ in ys], "y": ys} for u, (value, ys) in users.items()
        }
        doc = {
            "users": list(users),
            "num_samples": [len(ys) for _, ys in users.values()],
            "user_data": user_data,
        }
        (root / split / f"all_data_0_niid_05_keep_0_{split}_9.json").write_text(json.dumps(doc))
    return root


def _hf(root: Path, side: int = 28) -> Path:
    rows: dict[str, list[object]] = {"image": [], "writer_id": [], "character": [], "hsf_id": []}
    for writer, (value, ys) in TRAIN.items():
        for y in ys:
            pixels = np.full((side, side), round(value * 255), dtype=np.uint8)
            rows["image"].append(Image.fromarray(pixels, mode="L"))
            rows["writer_id"].append(writer)
            rows["character"].append(y)
            rows["hsf_id"].append(4)
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "writer_id": datasets.Value("string"),
            "character": datasets.ClassLabel(names=[str(i) for i in range(62)]),
            "hsf_id": datasets.Value("int64"),
        }
    )
    datasets.DatasetDict(train=datasets.Dataset.from_dict(rows, features=features)).save_to_disk(
        str(root)
    )
    return root


def _expected(users: dict[str, tuple[float, list[int]]]) -> tuple[list[int], list[int]]:
    labels = [y for _, ys in users.values() for y in ys]
    ids = [WRITERS.index(u) for u, (_, ys) in users.items() for _ in ys]
    return labels, ids


def test_leaf_layout_writers_labels_and_standardisation(tmp_path: Path) -> None:
    train, test = FemnistSource(str(_leaf(tmp_path / "femnist"))).load((1, 28, 28))
    assert train.x.shape == (6, 1, 28, 28) and test.x.shape == (2, 1, 28, 28)
    labels, ids = _expected(TRAIN)
    assert train.y.tolist() == labels and train.ids is not None and train.ids.tolist() == ids
    test_labels, test_ids = _expected(TEST)
    assert test.y.tolist() == test_labels and test.ids is not None
    assert test.ids.tolist() == test_ids  # a writer keeps its id across splits
    raw = torch.tensor([0.2, 0.2, 0.2, 0.9, 0.5, 0.5])
    mean, std = raw.mean(), raw.repeat_interleave(784).std()
    assert torch.allclose(train.x[:, 0, 0, 0], (raw - mean) / std, atol=1e-5)
    assert torch.allclose(test.x[:, 0, 5, 5], (torch.tensor([0.4, 0.1]) - mean) / std, atol=1e-5)


def test_hf_layout_saved_flwrlabs_femnist(tmp_path: Path) -> None:
    source = FemnistSource(str(_hf(tmp_path / "femnist")))
    train, test = source.load((3, 32, 32))
    assert train.x.shape == (6, 3, 32, 32) and len(test) == 0 and test.shape == (3, 32, 32)
    labels, ids = _expected(TRAIN)
    assert train.y.tolist() == labels and train.ids is not None and train.ids.tolist() == ids
    assert abs(train.x.mean().item()) < 1e-5 and abs(train.x.std().item() - 1) < 1e-3
    assert FemnistSource.name == "femnist" and FemnistSource.num_classes == 62


def test_the_layout_can_be_forced(tmp_path: Path) -> None:
    leaf = str(_leaf(tmp_path / "leaf"))
    assert len(FemnistSource(leaf, layout="leaf").load((1, 28, 28))[1]) == 2
    with pytest.raises(FedbenchError, match="data.source.layout='hf': .* holds LEAF's JSON"):
        FemnistSource(leaf, layout="hf").load((1, 28, 28))
    with pytest.raises(FedbenchError, match="not a LEAF data set"):
        FemnistSource(str(_hf(tmp_path / "hf")), layout="leaf").load((1, 28, 28))


def test_missing_files_are_one_line_saying_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError) as info:
        FemnistSource(str(tmp_path / "none")).load((1, 28, 28))
    message = str(info.value)
    assert "\n" not in message and f"resolves to {tmp_path / 'none'}" in message
    assert "./preprocess.sh -s niid --sf 0.05 -k 0 -t sample" in message
    assert "load_dataset('flwrlabs/femnist').save_to_disk(" in message


def test_other_data_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match="FEMNIST images are 28x28, found"):
        FemnistSource(str(_hf(tmp_path / "big", side=32))).load((1, 28, 28))
    bad = tmp_path / "bad" / "train"
    bad.mkdir(parents=True)
    (bad / "x.json").write_text('{"users": ["u"], "user_data": {}}')
    with pytest.raises(FedbenchError, match=r"x.json: user 'u' is listed but has no entry"):
        FemnistSource(str(bad.parent)).load((1, 28, 28))
    with pytest.raises(FedbenchError, match="holds images"):
        FemnistSource(str(_leaf(tmp_path / "ok"))).load((80,))


def test_femnist_config_one_device_per_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = conf_dir() / "data" / "femnist.yaml"
    assert path.read_text().splitlines()[0] == "# python -m fedbench data=femnist"
    cfg = OmegaConf.load(path)
    assert isinstance(cfg, DictConfig)
    assert cfg.partition.scheme == "natural_id" and cfg.augment is True
    assert cfg.num_classes == 62 and list(cfg.defaults) == [{"partition": "default"}, "_self_"]
    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path))
    source = build_source(cfg)
    assert isinstance(source, FemnistSource) and source.root_path == tmp_path / "femnist"
    _leaf(tmp_path / "femnist")
    train, _ = source.load((1, 28, 28))
    assert train.ids is not None and sorted(set(train.ids.tolist())) == [0, 1, 2]
