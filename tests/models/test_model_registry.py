"""The registry: every model YAML loads and builds, errors name the bad value."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from fedbench.errors import FedbenchError
from fedbench.models import (
    InputSpec,
    build_from_config,
    build_model,
    input_spec,
    input_spec_from_config,
    model_config,
    model_names,
)
from fedbench.paths import conf_dir

REQUIRED = {
    "small_cnn", "densenet40", "lenet", "alexnet", "googlenet", "squeezenet", "mobilenetv2",
    "resnet18", "resnet50", "mobilenetv3_small", "vit_tiny", "efficientnet_b0",
}  # fmt: skip


def test_model_names_lists_the_yaml_files() -> None:
    names = model_names()
    assert names == sorted(names)
    assert set(names) >= REQUIRED
    assert set(names) == {p.stem for p in (conf_dir() / "model").glob("*.yaml")}


@pytest.mark.parametrize("name", model_names())
def test_every_yaml_loads_and_instantiates(name: str) -> None:
    path = conf_dir() / "model" / f"{name}.yaml"
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# python -m fedbench"), f"{path}: first line must be the command"
    assert f"model={name}" in first_line
    cfg = model_config(name)
    assert cfg["name"] == name
    module, shape = build_model(name)
    assert isinstance(module, torch.nn.Module)
    assert shape == tuple(cfg["input_shape"])
    assert input_spec(name).shape == shape


def test_unknown_name_is_a_user_error_listing_choices() -> None:
    with pytest.raises(FedbenchError) as err:
        build_model("densenet41")
    message = str(err.value)
    assert "densenet41" in message
    assert "densenet40" in message and "resnet18" in message


def test_num_classes_override() -> None:
    module, _ = build_model("resnet18", num_classes=7)
    assert module(torch.randn(1, 3, 64, 64)).shape == (1, 7)


def test_training_models_follow_data_num_classes() -> None:
    # Standalone the oc.select default applies; inside a full config data wins.
    assert model_config("densenet40")["net"]["num_classes"] == 10
    for name in ("densenet40", "small_cnn"):
        raw = OmegaConf.load(conf_dir() / "model" / f"{name}.yaml")
        full = OmegaConf.create({"data": {"num_classes": 100}, "model": raw})
        module = build_from_config(full.model)
        assert module(torch.randn(2, 3, 32, 32)).shape == (2, 100)


def test_override_of_a_model_without_classes_is_refused() -> None:
    cfg = {"name": "x", "input_shape": [3], "net": {"_target_": "torch.nn.Identity"}}
    with pytest.raises(FedbenchError, match="num_classes"):
        build_from_config(cfg, num_classes=3)


def test_target_that_is_not_a_module_is_refused() -> None:
    cfg = {"name": "x", "input_shape": [3], "net": {"_target_": "builtins.dict"}}
    with pytest.raises(FedbenchError, match="not a torch.nn.Module"):
        build_from_config(cfg)


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        ({"input_shape": [3, 0]}, "input_shape"),
        ({"input_shape": "3x32x32"}, "input_shape"),
        ({"input_shape": [8], "input_dtype": "float16"}, "input_dtype"),
        ({"input_shape": [8], "input_dtype": "int64"}, "input_high"),
    ],
)
def test_bad_input_spec_is_a_user_error(cfg: dict[str, object], match: str) -> None:
    with pytest.raises(FedbenchError, match=match):
        input_spec_from_config(cfg)


def test_input_spec_examples() -> None:
    floats = InputSpec((3, 4, 4)).example(2)
    assert floats.shape == (2, 3, 4, 4) and floats.dtype == torch.float32
    ids = input_spec_from_config(
        {"input_shape": [50], "input_dtype": "int64", "input_high": 5}
    ).example(3, torch.Generator().manual_seed(0))
    assert ids.shape == (3, 50) and ids.dtype == torch.int64
    assert int(ids.min()) >= 0 and int(ids.max()) < 5
