"""data=hf on small files in the real formats, written in tmp_path."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import DictConfig, OmegaConf
from PIL import Image

from fedbench.data import build_source, hf_open
from fedbench.data.hf import HfSource
from fedbench.data.hf_encode import TEXT_VOCAB
from fedbench.errors import FedbenchError
from fedbench.paths import conf_dir

NAMES = ["ant", "bee", "cat"]


def _grey(value: int, size: int = 8) -> Image.Image:
    return Image.fromarray(np.full((size, size), value, dtype=np.uint8), mode="L")


def _saved_images(tmp_path: Path) -> Path:
    """A DatasetDict (train 6 / test 3) with Image, ClassLabel and writer_id, saved to disk."""
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=NAMES),
            "writer_id": datasets.Value("string"),
        }
    )
    train = {
        "image": [_grey(v) for v in (0, 40, 80, 120, 160, 200)],
        "label": [0, 1, 2, 0, 1, 2],
        "writer_id": ["w2", "w0", "w2", "w1", "w0", "w1"],
    }
    test = {"image": [_grey(v) for v in (10, 250, 30)], "label": [2, 1, 0]}
    test["writer_id"] = ["w1", "w3", "w2"]
    path = tmp_path / "saved"
    datasets.DatasetDict(
        train=datasets.Dataset.from_dict(train, features=features),
        test=datasets.Dataset.from_dict(test, features=features),
    ).save_to_disk(str(path))
    return path


def _source(path: Path | str, num_classes: int, **columns: str) -> HfSource:
    cache = Path(str(path)).parent / "hf-cache"
    return HfSource(str(path), num_classes, cache_dir=str(cache), **columns)  # type: ignore[arg-type]


def test_save_to_disk_images_standardised_with_train_stats_and_owners(tmp_path: Path) -> None:
    train, test = _source(_saved_images(tmp_path), 3).load((1, 8, 8))
    assert train.x.shape == (6, 1, 8, 8) and test.x.shape == (3, 1, 8, 8)
    assert train.y.tolist() == [0, 1, 2, 0, 1, 2] and test.y.tolist() == [2, 1, 0]
    raw = torch.tensor([0, 40, 80, 120, 160, 200], dtype=torch.float32) / 255
    mean, std = raw.repeat_interleave(64).mean(), raw.repeat_interleave(64).std()
    assert torch.allclose(train.x[:, 0, 0, 0], (raw - mean) / std, atol=1e-5)
    # The test split is standardised with the TRAIN statistics, not its own.
    assert torch.allclose(test.x[:, 0, 0, 0], (torch.tensor([10.0, 250, 30]) / 255 - mean) / std)
    # Owners: index among the sorted writers of both splits, the same in each.
    assert train.ids is not None and test.ids is not None
    assert train.ids.tolist() == [2, 0, 2, 1, 0, 1] and test.ids.tolist() == [1, 3, 2]


def test_grey_images_become_the_models_colour_size(tmp_path: Path) -> None:
    train, test = _source(_saved_images(tmp_path), 3).load((3, 16, 16))
    assert train.x.shape == (6, 3, 16, 16) and test.x.shape == (3, 3, 16, 16)
    assert torch.equal(train.x[:, 0], train.x[:, 2])
    assert abs(train.x.mean().item()) < 1e-5 and abs(train.x.std().item() - 1) < 1e-3


def test_imagefolder_of_pngs_in_class_folders(tmp_path: Path) -> None:
    # Colour images of two sizes; class folder names become the ClassLabel.
    for split, count in (("train", 3), ("test", 1)):
        for name, value in (("cat", 0), ("dog", 255)):
            folder = tmp_path / "pets" / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                size = (12, 10) if i % 2 else (6, 6)
                pixels = np.full((*size, 3), value, dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
    train, test = _source(tmp_path / "pets", 2).load((3, 8, 8))
    assert train.x.shape == (6, 3, 8, 8) and len(test) == 2
    assert sorted(train.y.tolist()) == [0, 0, 0, 1, 1, 1] and train.ids is None
    dark = train.x[train.y == 0]
    light = train.x[train.y == 1]
    assert dark.max() < 0 < light.min()  # cat (black) below the mean, dog (white) above


def test_parquet_text_with_string_labels_as_byte_ids(tmp_path: Path) -> None:
    folder = tmp_path / "reviews"
    folder.mkdir()
    pd.DataFrame(
        {"sentence": ["good", "bad café", "ok"], "labels": ["pos", "neg", "pos"]}
    ).to_parquet(folder / "train.parquet")
    pd.DataFrame({"sentence": ["meh"], "labels": ["zzz"]}).to_parquet(folder / "test.parquet")
    train, test = _source(folder, 3).load((6,))
    assert train.x.dtype == torch.int64 and train.x.shape == (3, 6)
    # Labels: index among the sorted strings of both splits.
    assert train.y.tolist() == [1, 0, 1] and test.y.tolist() == [2]
    assert train.x[0].tolist() == [ord(c) + 1 for c in "good"] + [0, 0]
    # UTF-8 bytes, cut at T=6: "bad caf" + the first byte of "é" would be 7.
    assert train.x[1].tolist() == [b + 1 for b in "bad café".encode()[:6]]
    assert int(train.x.max()) < TEXT_VOCAB


def test_csv_file_without_test_split_and_explicit_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    pd.DataFrame(
        {"body": ["x", "yy", "zzz", "w"], "kind": [1, 0, 1, 1], "who": [7, 3, 7, 9]}
    ).to_csv(path, index=False)
    source = _source(path, 2, text_column="body", label_column="kind", id_column="who")
    train, test = source.load((4,))
    assert train.y.tolist() == [1, 0, 1, 1] and len(test) == 0 and test.shape == (4,)
    assert train.ids is not None and train.ids.tolist() == [1, 0, 1, 2]
    assert train.x[2].tolist() == [ord("z") + 1] * 3 + [0]


def test_leaf_json_tree_through_hf(tmp_path: Path) -> None:
    root = tmp_path / "leaf"
    for split, users in (("train", {"u1": ("to be", "e"), "u0": ("or no", "t")}), ("test", {})):
        (root / split).mkdir(parents=True)
        user_data = {u: {"x": [x], "y": [y]} for u, (x, y) in users.items()}
        doc = {"users": list(users), "num_samples": [1] * len(users), "user_data": user_data}
        (root / split / "all_data.json").write_text(json.dumps(doc))
    train, test = _source(root, 2).load((5,))
    assert train.y.tolist() == [0, 1] and train.ids is not None and train.ids.tolist() == [1, 0]
    assert train.x[0].tolist() == [ord(c) + 1 for c in "to be"] and len(test) == 0


def test_num_classes_checked_against_the_data(tmp_path: Path) -> None:
    path = _saved_images(tmp_path)
    with pytest.raises(
        FedbenchError, match=r"data.num_classes=10: .* has 3 classes; set data.num_classes=3"
    ):
        _source(path, 10).load((1, 8, 8))
    csv = tmp_path / "ints.csv"
    pd.DataFrame({"text": ["a", "b"], "label": [0, 4]}).to_csv(csv, index=False)
    assert _source(csv, 8).load((2,))[0].y.tolist() == [0, 4]  # ints: a floor, 8 >= 5
    with pytest.raises(FedbenchError, match="set data.num_classes=5"):
        _source(csv, 3).load((2,))


def test_wrong_column_names_list_the_columns(tmp_path: Path) -> None:
    path = _saved_images(tmp_path)
    for key in ("image_column", "label_column", "id_column"):
        with pytest.raises(FedbenchError) as info:
            _source(path, 3, **{key: "nope"}).load((1, 8, 8))
        assert str(info.value) == (
            f"data.source.{key}='nope': no such column in {str(path)!r} "
            "(columns: image, label, writer_id)"
        )
    csv = tmp_path / "odd.csv"
    pd.DataFrame({"a": ["x"], "b": [1]}).to_csv(csv, index=False)
    with pytest.raises(FedbenchError, match=r"no image or text column found \(columns: a, b\)"):
        _source(csv, 2, label_column="b").load((2,))
    with pytest.raises(FedbenchError, match=r"no label column found \(columns: a, b\)"):
        _source(csv, 2, text_column="a").load((2,))


def test_model_shape_must_fit_the_kind_of_data(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match=r"model input shape \(8,\): .*holds images"):
        _source(_saved_images(tmp_path), 3).load((8,))
    csv = tmp_path / "t.csv"
    pd.DataFrame({"text": ["a", "b"], "label": ["x", "y"]}).to_csv(csv, index=False)
    with pytest.raises(FedbenchError, match=r"holds text, which needs a token model"):
        _source(csv, 2).load((1, 8, 8))


def test_negative_labels_are_refused(tmp_path: Path) -> None:
    csv = tmp_path / "neg.csv"
    pd.DataFrame({"text": ["a", "b"], "label": [1, -1]}).to_csv(csv, index=False)
    with pytest.raises(FedbenchError, match="labels run from -1 to 1"):
        _source(csv, 2).load((2,))


def test_missing_local_path_and_placeholder_name(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match=r"no such file or folder .*not a Hugging Face hub"):
        _source(tmp_path / "absent" / "set", 2).load((1, 8, 8))
    with pytest.raises(FedbenchError, match="data=hf needs data.name="):
        HfSource("hf", 10).load((1, 8, 8))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(FedbenchError, match=r"a \.txt file; valid: a \.parquet or \.csv"):
        _source(tmp_path / "notes.txt", 2).load((2,))


def test_unreachable_hub_answers_from_the_cache_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The probe says offline: datasets' own retries (~23 s here) must not run.
    monkeypatch.setattr(hf_open, "hub_reachable", lambda timeout=1.0: False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    start = time.perf_counter()
    with pytest.raises(FedbenchError) as info:
        HfSource("nobody/no-such-set", 10, cache_dir=str(tmp_path)).load((1, 8, 8))
    assert time.perf_counter() - start < 2.0
    message = str(info.value)
    assert "\n" not in message and f"Hugging Face cache {tmp_path} (offline" in message
    assert "datasets.load_dataset('nobody/no-such-set')" in message
    assert datasets.config.HF_HUB_OFFLINE is False  # restored after the call


def test_missing_hub_id_offline_is_one_line_and_fast(tmp_path: Path) -> None:
    """The real thing in a fresh process: HF_DATASETS_OFFLINE=1, an empty HF_HOME."""
    code = (
        "import time\n"
        "from fedbench.data.hf import HfSource\n"
        "from fedbench.errors import FedbenchError\n"
        "t = time.perf_counter()\n"
        "try:\n"
        "    HfSource('flwrlabs/not-cached', 62).load((1, 28, 28))\n"
        "except FedbenchError as e:\n"
        "    print(f'{time.perf_counter() - t:.3f}')\n"
        "    print(e)\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_DATASETS_OFFLINE": "1"}
    env.pop("HF_DATASETS_CACHE", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout + out.stderr
    assert float(lines[0]) < 1.0  # measured: ~0.01 s
    assert f"Hugging Face cache {tmp_path / 'datasets'}" in lines[1]
    assert "no local path" in lines[1] and "save_to_disk" in lines[1]
    assert "Traceback" not in out.stderr


def _evil(sentinel: Path) -> str:
    return f"open({str(sentinel)!r}, 'w').write('ran')\n"


def test_a_loading_script_in_a_data_folder_is_never_run(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    folder = tmp_path / "scripted"
    folder.mkdir()
    (folder / "scripted.py").write_text(_evil(sentinel))
    with pytest.raises(FedbenchError, match="no data set in this folder"):
        _source(folder, 2).load((2,))
    with pytest.raises(FedbenchError, match=r"a \.py file"):
        _source(folder / "scripted.py", 2).load((2,))
    pd.DataFrame({"text": ["a", "b"], "label": [0, 1]}).to_csv(folder / "rows.csv", index=False)
    assert len(_source(folder, 2).load((2,))[0]) == 2
    assert not sentinel.exists()


class _Payload:
    """Unpickling this would create the sentinel file."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (_evil(self.sentinel),))


def test_a_pickle_in_a_parquet_column_is_just_bytes(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    blob = pickle.dumps(_Payload(sentinel))
    path = tmp_path / "pickled.parquet"
    pd.DataFrame({"text": ["a", "b"], "label": [0, 1], "obj": [blob, blob]}).to_parquet(path)
    train, _ = _source(path, 2).load((3,))
    assert train.y.tolist() == [0, 1] and not sentinel.exists()
    with pytest.raises(FedbenchError, match="text_column='obj'"):
        _source(path, 2, text_column="obj").load((3,))
    assert not sentinel.exists()


def test_hf_config_builds_the_named_source(tmp_path: Path) -> None:
    path = conf_dir() / "data" / "hf.yaml"
    text = path.read_text()
    assert text.splitlines()[0].startswith("# python -m fedbench data=hf data.name=")
    cfg = OmegaConf.load(path)
    assert isinstance(cfg, DictConfig)
    assert cfg.name == "hf" and OmegaConf.is_missing(cfg, "num_classes") and cfg.augment is False
    assert list(cfg.defaults) == [{"partition": "default"}, "_self_"]
    cfg.name, cfg.num_classes = str(_saved_images(tmp_path)), 3
    source = build_source(cfg)
    assert isinstance(source, HfSource) and source.name == cfg.name and source.num_classes == 3
    assert len(source.load((1, 8, 8))[0]) == 6
