"""Width-scaled submodels of zoo models (HeteroFL's rule) and their slices of the full model.

A submodel at rate r (0 < r <= 1) is the same architecture with every
hidden width scaled to ceil(r * width) (Diao et al., HeteroFL, ICLR'21): the
input channels and the output layer (the classes) stay full. Its tensors are
index slices of the full model's: along each dimension whose size shrank,
the submodel holds `channels` of the full dimension, chosen by an
`Extraction`:

- `first`: the first ceil(r * C) channels (HeteroFL, static; FjORD's ordered
  dropout, with r drawn per local batch up to the device's p_max);
- `rolling`: a window of ceil(r * C) consecutive channels (mod C) that starts
  `offset` channels further each round (FedRolex, Alam et al., NeurIPS'22).

Channels that are linked (a conv's outputs, its BatchNorm, the next conv's
inputs, a residual sum) always share their full size C, so one window per
size keeps them consistent. A dimension made of C channels x b features
each (a flattened feature map feeding a linear layer) is declared in the
rule's `blocks`, so its channels move as whole blocks.

BatchNorm: the running statistics are sliced and averaged per index like
any weight (a channel's statistics come from the devices that held it);
`num_batches_tracked` and other integer buffers stay the full model's.
This is not HeteroFL's static BN (sBN), which drops tracked statistics.

Only models whose rule is registered here have submodels; `width_rule`
refuses the others with one line naming the supported ones.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from fedbench.errors import FedbenchError
from fedbench.models.densenet import DenseNet
from fedbench.models.registry import build_from_config, model_config, model_names
from fedbench.models.resnet import ResNet

Index = tuple[torch.Tensor, ...]  # per dimension: the full model's indices it holds
# (tensor, dim) -> the tensors whose outputs (dim 0), concatenated in order, make that dim.
Concat = Mapping[tuple[str, int], tuple[str, ...]]


@dataclass(frozen=True)
class WidthRule:
    """How one model family scales: its net's width arguments, and its flattened inputs."""

    widths: tuple[str, ...]  # the net's keyword arguments that are hidden widths (int or ints)
    # Parameters whose inputs (dim 1) are the last conv layer's map flattened: C x b each.
    flattened: tuple[str, ...] = ()
    blocks: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # param -> dim -> b
    # The full widths of width arguments whose default is None (derived from the others).
    derived: Callable[[Callable[[str], Any]], Mapping[str, Any]] | None = None
    # The full model's concatenated input dimensions (DenseNet), from its tensors.
    concat: Callable[[Mapping[str, torch.Tensor]], Concat] | None = None

    def net_at(self, net: Mapping[str, Any], rate: float) -> dict[str, Any]:
        """The net config at `rate`: each width argument ceil(rate * width)."""
        out = dict(net)

        def get(key: str) -> Any:
            return net[key] if key in net else _default(str(net["_target_"]), key)

        for key in self.widths:
            value = get(key)
            if value is None and self.derived is not None:
                value = self.derived(get)[key]
            if isinstance(value, int):
                out[key] = scaled(value, rate)
            else:  # a list of widths; markers such as VGG's "M" stay
                out[key] = [scaled(v, rate) if isinstance(v, int) else v for v in value]
        return out

    def block(self, full: Mapping[str, torch.Tensor], name: str, dim: int) -> int:
        """Features per channel along `dim` of `name` (1: the dimension is channels)."""
        if dim == 1 and name in self.flattened:
            last = [t for t in full.values() if t.dim() == 4][-1]  # the last conv's weight
            return int(full[name].shape[1]) // int(last.shape[0])
        return self.blocks.get(name, {}).get(dim, 1)


def _dense_concat(full: Mapping[str, torch.Tensor]) -> Concat:
    """DenseNet's concatenated inputs (fedbench.models.densenet), from its tensors in order.

    A dense layer's conv (`*.conv.weight`) appends its outputs to the running
    concatenation; any other conv (the stem, a transition) starts a new one.
    Every BatchNorm tensor (dim 0), conv (dim 1) and the classifier (dim 1)
    consumes the concatenation as it stands.
    """
    out: dict[tuple[str, int], tuple[str, ...]] = {}
    parts: list[str] = []
    for name, t in full.items():
        if t.dim() == 4:
            if parts:
                out[(name, 1)] = tuple(parts)
            parts = [*parts, name] if name.endswith(".conv.weight") else [name]
        elif t.dim() == 2 and parts:  # the classifier: its bias is the classes'
            out[(name, 1)] = tuple(parts)
            parts = []
        elif t.dim() == 1 and parts:
            out[(name, 0)] = tuple(parts)
    return out


_RULES: dict[str, WidthRule] = {
    "fedbench.models.small_cnn.SmallCNN": WidthRule(("width",), ("classifier.weight",)),
    "fedbench.models.lenet.LeNet": WidthRule(("channels", "hidden"), ("classifier.0.weight",)),
    "fedbench.models.alexnet.AlexNet": WidthRule(("channels", "hidden"), ("classifier.1.weight",)),
    "fedbench.models.vgg.VGG": WidthRule(("layers", "hidden"), ("classifier.0.weight",)),
    "fedbench.models.reduced_mobilenet.ReducedMobileNet": WidthRule(
        ("stem_width", "widths"), ("classifier.weight",)
    ),
    "fedbench.models.reduced_resnet.ReducedResNet": WidthRule(("stem_width", "widths")),
    # The shortcut's outputs are the block's, so one window per size links them.
    "fedbench.models.resnet.ResNet": WidthRule(
        ("widths",),
        derived=lambda get: {"widths": ResNet.stage_widths(get("layers"), get("width"))},
    ),
    # Depthwise convs: groups = channels, so a narrower net has narrower groups.
    "fedbench.models.mobilenetv2.MobileNetV2": WidthRule(("stem_width", "widths", "last_width")),
    "fedbench.models.mobilenetv3.MobileNetV3Small": WidthRule(
        ("stem_width", "expanded", "outs", "squeeze", "last_width", "head_width")
    ),
    "fedbench.models.densenet.DenseNet": WidthRule(
        ("stem_channels", "growth_rate", "transitions"),
        derived=lambda get: {
            "transitions": DenseNet.transition_widths(
                get("depth"), get("growth_rate"), get("stem_channels")
            )
        },
        concat=_dense_concat,
    ),
}


def _default(target: str, key: str) -> Any:
    """The net class's default for an argument its YAML leaves out."""
    module, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return inspect.signature(cls).parameters[key].default


def scaled(width: int, rate: float) -> int:
    """HeteroFL's hidden width at `rate`: ceil(rate * width), at least 1."""
    return max(1, math.ceil(rate * width - 1e-9))


def supported() -> list[str]:
    """The `_target_`s of the nets with a width rule."""
    return sorted(_RULES)


def supported_models() -> list[str]:
    """The zoo models (fedbench/conf/model/) whose net has a width rule."""
    return [n for n in model_names() if str(model_config(n)["net"]["_target_"]) in _RULES]


def width_rule(model: Mapping[str, Any]) -> WidthRule:
    """The width rule of a model config (`model.to_plain()`), or a one-line refusal."""
    target = str(model["net"]["_target_"])
    rule = _RULES.get(target)
    if rule is None:
        names = ", ".join(supported_models())
        raise FedbenchError(
            f"model={model.get('name')!r} ({target}) has no width rule for submodels; "
            f"supported: {names} (fedbench/models/width.py)"
        )
    return rule


def build_at(model: Mapping[str, Any], rate: float) -> nn.Module:
    """The model of config `model` at width rate `rate` (1: the full model)."""
    check_rate(rate)
    rule = width_rule(model)
    return build_from_config({**model, "net": rule.net_at(model["net"], rate)})


def check_rate(rate: float) -> None:
    if not 0 < rate <= 1:
        raise FedbenchError(f"model rate {rate!r}: a number in (0, 1]")


@dataclass(frozen=True)
class Extraction:
    """Which channels of a full dimension a submodel holds: `first`, or a `rolling` window."""

    kind: str = "first"  # "first" | "rolling"
    offset: int = 0  # rolling: the window's start, in channels (mod C)

    def channels(self, full: int, kept: int) -> torch.Tensor:
        if kept >= full:
            return torch.arange(full)
        if self.kind == "rolling":
            return (self.offset + torch.arange(kept)) % full
        return torch.arange(kept)


def indices(
    full: Mapping[str, torch.Tensor],
    sub_shapes: Mapping[str, Sequence[int]],
    rule: WidthRule,
    how: Extraction,
) -> dict[str, Index]:
    """Per tensor of the submodel: the full model's indices along each of its dimensions."""
    out: dict[str, Index] = {}
    concat = rule.concat(full) if rule.concat is not None else {}
    for name, shape in sub_shapes.items():
        whole = full[name].shape
        per_dim = []
        for dim, (f, s) in enumerate(zip(whole, shape, strict=True)):
            parts = concat.get((name, dim))
            if parts is not None:
                per_dim.append(_concatenated(full, sub_shapes, parts, how, (name, dim, f, s)))
                continue
            b = rule.block(full, name, dim)
            if f % b or s % b:
                raise ValueError(f"{name} dim {dim}: sizes {f}, {s} are not blocks of {b}")
            ch = how.channels(f // b, s // b)
            per_dim.append((ch[:, None] * b + torch.arange(b)).reshape(-1))
        out[name] = tuple(per_dim)
    return out


def _concatenated(
    full: Mapping[str, torch.Tensor],
    sub_shapes: Mapping[str, Sequence[int]],
    parts: Sequence[str],
    how: Extraction,
    where: tuple[str, int, int, int],
) -> torch.Tensor:
    """A concatenated dimension's indices: of each part, the channels its producer holds."""
    pieces, start, kept = [], 0, 0
    for part in parts:
        f, s = int(full[part].shape[0]), int(sub_shapes[part][0])
        pieces.append(start + how.channels(f, s))
        start, kept = start + f, kept + s
    name, dim, f, s = where
    if (start, kept) != (f, s):
        raise ValueError(f"{name} dim {dim}: sizes {f}, {s} are not the concatenation of {parts}")
    return torch.cat(pieces)


def extract(
    full: Mapping[str, torch.Tensor], index: Mapping[str, Index]
) -> dict[str, torch.Tensor]:
    """The submodel's tensors: each full tensor at its indices (copies)."""
    return {name: _take(full[name], idx).clone() for name, idx in index.items()}


def place(
    full: Mapping[str, torch.Tensor],
    index: Mapping[str, Index],
    sub: Mapping[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """`extract`'s inverse: the full tensors with the submodel's written at its indices.

    A 0-d tensor (BatchNorm's `num_batches_tracked`) is the submodel's.
    """
    out = {name: value.clone() for name, value in full.items()}
    for name, idx in index.items():
        if out[name].dim() == 0:
            out[name] = sub[name].clone()
        else:
            out[name][torch.meshgrid(*idx, indexing="ij")] = sub[name]
    return out


def _take(t: torch.Tensor, idx: Index) -> torch.Tensor:
    if t.dim() == 0:
        return t
    return t[torch.meshgrid(*idx, indexing="ij")]


def aggregate(
    full: Mapping[str, torch.Tensor],
    updates: Sequence[tuple[Mapping[str, Index], Mapping[str, torch.Tensor], float]],
) -> dict[str, torch.Tensor]:
    """Per-entry average: each entry over the updates that hold it, weighted (num-examples).

    `updates` are (indices, submodel tensors, weight). An entry no update
    held keeps its value in `full`; integer tensors (BatchNorm's
    `num_batches_tracked`) stay `full`'s.
    """
    out: dict[str, torch.Tensor] = {}
    for name, value in full.items():
        if not value.is_floating_point():
            out[name] = value.clone()
            continue
        total = torch.zeros_like(value, dtype=torch.float64)
        weight = torch.zeros_like(value, dtype=torch.float64)
        for index, tensors, w in updates:
            if name not in index or w <= 0:
                continue
            idx = index[name]
            where = torch.meshgrid(*idx, indexing="ij") if value.dim() else ()
            total[where] += w * tensors[name].to(torch.float64)
            weight[where] += w
        held = weight > 0
        merged = value.to(torch.float64).clone()
        merged[held] = total[held] / weight[held]
        out[name] = merged.to(value.dtype)
    return out
