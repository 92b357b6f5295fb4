"""MobileNetV2 (Sandler et al., 2018), as torchvision's `mobilenet_v2`.

Inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 linear project;
residual when shapes allow) with ReLU6: 3,504,872 parameters at width 1.0
and 1000 classes.
"""

from __future__ import annotations

from torch import Tensor, nn

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


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
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
    ) -> None:
        super().__init__()
        cin = make_divisible(32 * width_mult)
        last = make_divisible(1280 * max(1.0, width_mult))
        layers: list[nn.Module] = [ConvNormAct(in_channels, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in _SETTINGS:
            cout = make_divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers += [ConvNormAct(cin, last, 1, act=nn.ReLU6), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
