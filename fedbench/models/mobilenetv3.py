"""MobileNetV3-Small (Howard et al., "Searching for MobileNetV3", 2019).

As torchvision's `mobilenet_v3_small`: inverted residuals with optional
squeeze-excite (hard-sigmoid gate) and ReLU or hard-swish, a 576-channel
last conv and a 1024-unit hard-swish head: 2,542,856 parameters at 1000
classes.
"""

from __future__ import annotations

from torch import Tensor, nn

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


class Block(nn.Module):
    def __init__(
        self, cin: int, kernel: int, expanded: int, cout: int, se: bool, hswish: bool, stride: int
    ) -> None:
        super().__init__()
        act: ActFactory = nn.Hardswish if hswish else nn.ReLU
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(ConvNormAct(cin, expanded, 1, act=act, eps=_EPS))
        layers.append(ConvNormAct(expanded, expanded, kernel, stride, expanded, act=act, eps=_EPS))
        if se:
            layers.append(
                SqueezeExcite(expanded, make_divisible(expanded // 4), nn.ReLU, nn.Hardsigmoid)
            )
        layers.append(ConvNormAct(expanded, cout, 1, act=None, eps=_EPS))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvNormAct(in_channels, 16, 3, 2, act=nn.Hardswish, eps=_EPS)]
        cin = 16
        for kernel, expanded, cout, se, hswish, stride in _SMALL:
            layers.append(Block(cin, kernel, expanded, cout, se, hswish, stride))
            cin = cout
        last = 6 * cin
        layers += [ConvNormAct(cin, last, 1, act=nn.Hardswish, eps=_EPS), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(last, 1024),
            nn.Hardswish(),
            nn.Dropout(dropout),
            nn.Linear(1024, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
