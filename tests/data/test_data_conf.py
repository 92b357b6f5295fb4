from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf

from fedbench.data import SAMPLED, DailyStream, build_source, make_splits, partition
from fedbench.data.cifar10 import Cifar10Source
from fedbench.data.digits import DigitsSource
from fedbench.data.partitioners import library_schemes
from fedbench.errors import FedbenchError
from fedbench.paths import conf_dir

NAMES = ["cifar10", "digits", "femnist", "hf", "shakespeare", "speech_commands"]
# The model each data set runs with unless model=... picks another (conf/data_model/).
FITTED = {
    "cifar10": "small_cnn",
    "digits": "small_cnn",
    "femnist": "femnist_cnn",
    "hf": "small_cnn",
    "shakespeare": "char_lstm",
    "speech_commands": "audio_cnn",
}


def _load(path: Path) -> DictConfig:
    cfg = OmegaConf.load(path)
    assert isinstance(cfg, DictConfig)
    return cfg


def _composed(*overrides: str) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(conf_dir()), version_base=None):
        return compose("config", overrides=list(overrides))


def test_every_data_config_is_present_with_its_model() -> None:
    assert sorted(p.stem for p in (conf_dir() / "data").glob("*.yaml")) == NAMES
    assert sorted(p.stem for p in (conf_dir() / "data_model").glob("*.yaml")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_config_shape_and_run_comment(name: str) -> None:
    path = conf_dir() / "data" / f"{name}.yaml"
    assert path.read_text().splitlines()[0].startswith(f"# python -m fedbench data={name}")
    overrides = [f"data={name}"] + (
        ["data.name=some/set", "data.num_classes=3"] if name == "hf" else []
    )
    composed = _composed(*overrides)
    cfg = composed.data
    assert composed.model.name == FITTED[name]
    assert _composed(*overrides, "model=lenet").model.name == "lenet"  # the command line wins
    assert cfg.name == (name if name != "hf" else "some/set") and cfg.num_classes >= 2
    assert 0 < cfg.test_fraction < 1 and 0 <= cfg.server_fraction < 1
    assert cfg.partition.scheme in [*library_schemes(), SAMPLED]
    assert isinstance(cfg.augment, bool)
    source = build_source(cfg)
    assert source.name == cfg.name and source.num_classes == cfg.num_classes


def test_cifar10_root_from_env_or_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FEDBENCH_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    source = build_source(_composed("data=cifar10").data)
    assert isinstance(source, Cifar10Source) and source.download is True
    assert source.root_path == tmp_path / ".cache" / "fedbench" / "data"
    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path / "elsewhere"))
    source = build_source(_composed("data=cifar10").data)
    assert isinstance(source, Cifar10Source) and source.root_path == tmp_path / "elsewhere"


def test_build_source_errors() -> None:
    with pytest.raises(FedbenchError, match="data.source._target_"):
        build_source(OmegaConf.create({"source": {"_target_": "fedbench.data.nope.Nope"}}))
    with pytest.raises(FedbenchError, match="not a DataSource"):
        build_source(OmegaConf.create({"source": {"_target_": "collections.OrderedDict"}}))
    with pytest.raises(FedbenchError, match="missing"):
        build_source(OmegaConf.create({"name": "digits"}))
    cfg = {"num_classes": 100, "source": {"_target_": "fedbench.data.digits.DigitsSource"}}
    with pytest.raises(FedbenchError, match="data.num_classes=100"):
        build_source(OmegaConf.create(cfg))


def test_digits_config_end_to_end() -> None:
    """How a client uses the package: config -> splits -> partition -> day."""
    cfg = _composed("data=digits").data
    source = build_source(cfg)
    assert isinstance(source, DigitsSource)
    splits = make_splits(source, (3, 32, 32), 0, cfg.server_fraction, cfg.test_fraction)
    parts = partition(splits.pool.y.numpy(), 10, cfg.partition.scheme, seed=0)
    stream = DailyStream(splits.pool, parts[3], 64, seed=0, augment=cfg.augment)
    day = stream.day(17)
    assert len(day) == 64 and day.shape == (3, 32, 32)
    assert np.isin(stream.base_indices(17), parts[3]).all()
