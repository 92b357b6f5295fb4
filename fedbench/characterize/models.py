"""Which network a characterisation row is about: a zoo model, optionally resized.

Studies name zoo models (fedbench/conf/model/<name>.yaml); paper 002's layer-only
stacks also vary `depth` and `width`, which are fields of the model's `net`.
A `ModelRef` carries the name plus such net overrides, so a worker process
can rebuild exactly the same module from it (it is small and picklable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from fedbench.errors import FedbenchError, choices, closest
from fedbench.models import InputSpec, build_from_config, input_spec_from_config, model_config
from fedbench.models import model_names as zoo_names

NetValue = int | float | str | bool


@dataclass(frozen=True)
class ModelRef:
    name: str  # a model of the zoo
    net: tuple[tuple[str, NetValue], ...] = ()  # overrides of the YAML's `net` fields

    @property
    def label(self) -> str:
        """`conv_only[depth=4,width=128]`, or the plain name without overrides."""
        if not self.net:
            return self.name
        return f"{self.name}[{','.join(f'{k}={v}' for k, v in self.net)}]"

    def config(self) -> dict[str, Any]:
        cfg = model_config(self.name)
        net = dict(cfg["net"])
        for key, value in self.net:
            if key not in net:
                raise FedbenchError(
                    f"model {self.name}: its net has no field {key!r}; valid: {choices(net)}"
                )
            net[key] = value
        cfg["net"] = net
        return cfg

    def build(self) -> tuple[nn.Module, InputSpec]:
        cfg = self.config()
        return build_from_config(cfg), input_spec_from_config(cfg, where=self.label)


def check_models(names: tuple[str, ...], key: str) -> None:
    """Refuse unknown zoo names with the closest valid one."""
    valid = zoo_names()
    for name in names:
        if name not in valid:
            raise FedbenchError(
                f"{key}={name!r}: no such model{closest(name, valid)}; valid: {choices(valid)}"
            )


def stack_params(module: nn.Module) -> int:
    """Parameters of the `features` stack (what paper 002's Tables 4-5 count), else all."""
    features = getattr(module, "features", None)
    target = features if isinstance(features, nn.Module) else module
    return sum(p.numel() for p in target.parameters())
