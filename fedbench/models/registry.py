"""The model zoo's registry: one YAML per model in fedbench/conf/model/, nothing else.

A model YAML names the model, gives the shape of one input example and the
`net` to instantiate (Hydra `_target_`)::

    name: densenet40            # equals the file name
    input_shape: [3, 32, 32]    # one example, without the batch dimension
    input_dtype: float32        # optional: float32 (default) or int64
    input_high: 80              # int64 inputs only: ids lie in [0, input_high)
    net: {_target_: ..., num_classes: ...}

Integer inputs (token ids for language models) are described by
`input_dtype: int64` plus `input_high`; `InputSpec.example` then draws ids
in range, so anything that runs a model on synthetic input (the workload
measurer, tests) stays generic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from fedbench.errors import FedbenchError, choices
from fedbench.paths import conf_dir

_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "int64": torch.int64}


@dataclass(frozen=True)
class InputSpec:
    """What one input example of a model looks like."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    high: int | None = None  # integer inputs: values lie in [0, high)

    def example(self, batch_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """A random batch of inputs of this spec (normal floats or in-range ids)."""
        size = (batch_size, *self.shape)
        if self.dtype.is_floating_point:
            return torch.randn(size, generator=generator, dtype=self.dtype)
        assert self.high is not None  # enforced when the spec is read
        return torch.randint(0, self.high, size, generator=generator, dtype=self.dtype)


def _model_dir() -> Path:
    return conf_dir() / "model"


def model_names() -> list[str]:
    """Names of all models, i.e. the YAML files in fedbench/conf/model/, sorted."""
    return sorted(p.stem for p in _model_dir().glob("*.yaml"))


def model_config(name: str) -> dict[str, Any]:
    """The resolved and checked YAML of model `name`.

    Interpolations resolve standalone: `${oc.select:data.num_classes,10}`
    takes its default because there is no `data` key outside a full config.
    """
    path = _model_dir() / f"{name}.yaml"
    if not path.is_file():
        raise FedbenchError(
            f"model={name!r}: no such model (no {path}); valid: {choices(model_names())}"
        )
    container = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(container, dict):
        raise FedbenchError(f"{path}: expected a mapping with keys name, input_shape, net")
    cfg: dict[str, Any] = {str(k): v for k, v in container.items()}
    if cfg.get("name") != name:
        raise FedbenchError(
            f"{path}: key name={cfg.get('name')!r} must equal the file name {name!r}"
        )
    input_spec_from_config(cfg, where=str(path))
    _net_of(cfg, where=str(path))
    return cfg


def input_spec_from_config(cfg: Mapping[str, Any], where: str = "model config") -> InputSpec:
    """The InputSpec of a model config (a model YAML or a composed `cfg.model`)."""
    cfg = _plain(cfg)
    shape = cfg.get("input_shape")
    if (
        not isinstance(shape, list | tuple)
        or not shape
        or not all(isinstance(s, int) and s > 0 for s in shape)
    ):
        raise FedbenchError(f"{where}: input_shape={shape!r} must be a list of positive ints")
    dtype_name = cfg.get("input_dtype", "float32")
    if dtype_name not in _DTYPES:
        raise FedbenchError(f"{where}: input_dtype={dtype_name!r}; valid: {choices(_DTYPES)}")
    dtype = _DTYPES[dtype_name]
    high = cfg.get("input_high")
    if not dtype.is_floating_point and not (isinstance(high, int) and high > 0):
        raise FedbenchError(
            f"{where}: input_dtype={dtype_name} needs input_high (exclusive id bound), got {high!r}"
        )
    return InputSpec(tuple(shape), dtype, high if not dtype.is_floating_point else None)


def input_spec(name: str) -> InputSpec:
    return input_spec_from_config(model_config(name), where=f"fedbench/conf/model/{name}.yaml")


def build_from_config(cfg: Mapping[str, Any], num_classes: int | None = None) -> nn.Module:
    """Instantiate the `net` of a model config, optionally with another class count."""
    cfg = _plain(cfg)
    where = f"model {cfg.get('name', '?')!r}"
    net = dict(_net_of(cfg, where))
    if num_classes is not None:
        if "num_classes" not in net:
            raise FedbenchError(
                f"{where}: its net ({net['_target_']}) has no num_classes to set to {num_classes}"
            )
        net["num_classes"] = num_classes
    module = instantiate(net, _convert_="all")
    if not isinstance(module, nn.Module):
        raise FedbenchError(f"{where}: net._target_={net['_target_']} is not a torch.nn.Module")
    return module


def build_model(name: str, num_classes: int | None = None) -> tuple[nn.Module, tuple[int, ...]]:
    """Model `name` from fedbench/conf/model/<name>.yaml and its input shape (C, H, W) or (T,).

    `num_classes` replaces the YAML's class count (FedbenchError if the model
    has none, e.g. dcgan).
    """
    cfg = model_config(name)
    return build_from_config(cfg, num_classes), tuple(cfg["input_shape"])


def _plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        return {str(k): v for k, v in container.items()}
    return dict(cfg)


def _net_of(cfg: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    net = cfg.get("net")
    if not isinstance(net, Mapping) or not isinstance(net.get("_target_"), str):
        raise FedbenchError(f"{where}: key net must be a mapping with a _target_")
    return net
