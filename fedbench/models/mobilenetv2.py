"""MobileNetV2 (Sandler et al., 2018), as torchvision's `mobilenet_v2`.

Inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 linear project;
residual on a stage's repeated blocks) with ReLU6: 3,504,872 parameters at
width 1.0 and 1000 classes.

`stem_width`, `widths` (each stage's output) and `last_width` are the
reference's channels; `width_mult` scales them as torchvision does (to
multiples of 8), and 1.0 uses them as given, so a width-scaled submodel
(fedbench.models.width) passes each ceil(r * w) and gets exactly that. A
block's expanded width is t x its input, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError
from fedbench.models.layers import ConvNormAct, make_divisible

# (expansion t, output channels c, repeats n, first stride s) - paper Table 2.
_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)

_WIDTHS = tuple(row[1] for row in _SETTINGS)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, residual: bool) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = residual
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvNormAct(cin, hidden, 1, act=nn.ReLU6))
        layers += [
            ConvNormAct(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
            ConvNormAct(hidden, cout, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


class MobileNetV2(nn.Module):
    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        width_mult: float = 1.0,
        dropout: float = 0.2,
        stem_width: int = 32,
        widths: Sequence[int] = _WIDTHS,
        last_width: int = 1280,
    ) -> None:
        super().__init__()
        if len(widths) != len(_SETTINGS):
            raise FedbenchError(f"MobileNetV2 widths={list(widths)}: {len(_SETTINGS)} stages")
        cin = _mult(stem_width, width_mult)
        last = _mult(last_width, max(1.0, width_mult))
        layers: list[nn.Module] = [ConvNormAct(in_channels, cin, 3, 2, act=nn.ReLU6)]
        ref_in = _mult(32, width_mult)
        for (t, ref, n, s), c in zip(_SETTINGS, widths, strict=True):
            cout = _mult(c, width_mult)
            ref_out = _mult(ref, width_mult)
            for i in range(n):
                # Residual where the reference's shapes allow (torchvision's rule on
                # the reference widths), so a narrower submodel keeps the structure.
                residual = (s == 1 or i > 0) and ref_in == ref_out
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t, residual))
                cin, ref_in = cout, ref_out
        layers += [ConvNormAct(cin, last, 1, act=nn.ReLU6), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def _mult(width: int, mult: float) -> int:
    """`width` at torchvision's multiplier; as given at 1.0 (a submodel's exact widths)."""
    return width if mult == 1.0 else make_divisible(width * mult)
