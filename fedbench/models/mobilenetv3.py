"""MobileNetV3-Small (Howard et al., "Searching for MobileNetV3", 2019).

As torchvision's `mobilenet_v3_small`: inverted residuals with optional
squeeze-excite (hard-sigmoid gate) and ReLU or hard-swish, a 576-channel
last conv and a 1024-unit hard-swish head: 2,542,856 parameters at 1000
classes.

`stem_width`, `expanded`, `outs`, `squeeze` (each squeeze-excite's reduced
width; None where a block has none), `last_width` and `head_width` default
to the reference's; a width-scaled submodel (fedbench.models.width) passes
each ceil(r * w). Which blocks expand and which are residual follows the
reference table, so a narrower submodel keeps the full model's structure.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError
from fedbench.models.layers import ActFactory, ConvNormAct, SqueezeExcite, make_divisible

# (kernel, expanded, out, squeeze-excite, hard-swish, stride) - paper Table 2.
_SMALL = (
    (3, 16, 16, True, False, 2),
    (3, 72, 24, False, False, 2),
    (3, 88, 24, False, False, 1),
    (5, 96, 40, True, True, 2),
    (5, 240, 40, True, True, 1),
    (5, 240, 40, True, True, 1),
    (5, 120, 48, True, True, 1),
    (5, 144, 48, True, True, 1),
    (5, 288, 96, True, True, 2),
    (5, 576, 96, True, True, 1),
    (5, 576, 96, True, True, 1),
)
_EPS = 0.001
_STEM = 16
# Each block's input width in the reference: whether it expands and is residual.
_INPUTS = (_STEM, *(row[2] for row in _SMALL[:-1]))
_EXPANDED = tuple(row[1] for row in _SMALL)
_OUTS = tuple(row[2] for row in _SMALL)
_SQUEEZE = tuple(make_divisible(row[1] // 4) if row[3] else None for row in _SMALL)


class Block(nn.Module):
    def __init__(
        self,
        cin: int,
        kernel: int,
        expanded: int,
        cout: int,
        squeeze: int | None,
        hswish: bool,
        stride: int,
        expand: bool,
        residual: bool,
    ) -> None:
        super().__init__()
        act: ActFactory = nn.Hardswish if hswish else nn.ReLU
        self.use_residual = residual
        layers: list[nn.Module] = []
        if expand:
            layers.append(ConvNormAct(cin, expanded, 1, act=act, eps=_EPS))
        layers.append(ConvNormAct(expanded, expanded, kernel, stride, expanded, act=act, eps=_EPS))
        if squeeze is not None:
            layers.append(SqueezeExcite(expanded, squeeze, nn.ReLU, nn.Hardsigmoid))
        layers.append(ConvNormAct(expanded, cout, 1, act=None, eps=_EPS))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


class MobileNetV3Small(nn.Module):
    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        dropout: float = 0.2,
        stem_width: int = _STEM,
        expanded: Sequence[int] = _EXPANDED,
        outs: Sequence[int] = _OUTS,
        squeeze: Sequence[int | None] = _SQUEEZE,
        last_width: int = 6 * _SMALL[-1][2],
        head_width: int = 1024,
    ) -> None:
        super().__init__()
        if not len(expanded) == len(outs) == len(squeeze) == len(_SMALL):
            raise FedbenchError(
                f"MobileNetV3Small expanded, outs, squeeze: {len(_SMALL)} blocks each"
            )
        if [s is None for s in squeeze] != [not row[3] for row in _SMALL]:
            raise FedbenchError(
                f"MobileNetV3Small squeeze={list(squeeze)}: a width where the reference "
                "has squeeze-excite, null elsewhere"
            )
        layers: list[nn.Module] = [
            ConvNormAct(in_channels, stem_width, 3, 2, act=nn.Hardswish, eps=_EPS)
        ]
        cin = stem_width
        for row, ref_in, wide, cout, sq in zip(
            _SMALL, _INPUTS, expanded, outs, squeeze, strict=True
        ):
            kernel, ref_wide, ref_out, _, hswish, stride = row
            expand, residual = ref_wide != ref_in, stride == 1 and ref_in == ref_out
            layers.append(Block(cin, kernel, wide, cout, sq, hswish, stride, expand, residual))
            cin = cout
        layers += [
            ConvNormAct(cin, last_width, 1, act=nn.Hardswish, eps=_EPS),
            nn.AdaptiveAvgPool2d(1),
        ]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(last_width, head_width),
            nn.Hardswish(),
            nn.Dropout(dropout),
            nn.Linear(head_width, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
