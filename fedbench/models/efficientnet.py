"""EfficientNet-B0 (Tan and Le, 2019), as torchvision's `efficientnet_b0`.

MBConv blocks (1x1 expand, depthwise k x k, squeeze-excite sized from the
block's input channels, 1x1 project) with SiLU, a 1280-channel head:
5,288,548 parameters at 1000 classes. Stochastic depth is left out: it only
regularises, changes no parameter, and would make one step's measured
workload random.
"""

from __future__ import annotations

from torch import Tensor, nn

from fedbench.models.layers import ConvNormAct, SqueezeExcite

# (expansion, kernel, stride, in, out, repeats) - paper Table 1 (B0).
_B0 = (
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
)


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvNormAct(cin, hidden, 1, act=nn.SiLU))
        layers += [
            ConvNormAct(hidden, hidden, kernel, stride, hidden, act=nn.SiLU),
            SqueezeExcite(hidden, max(1, cin // 4), nn.SiLU, nn.Sigmoid),
            ConvNormAct(hidden, cout, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


class EfficientNetB0(nn.Module):
    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvNormAct(in_channels, 32, 3, 2, act=nn.SiLU)]
        for expand, kernel, stride, cin, cout, repeats in _B0:
            for i in range(repeats):
                first = i == 0
                layers.append(
                    MBConv(cin if first else cout, cout, kernel, stride if first else 1, expand)
                )
        layers += [ConvNormAct(320, 1280, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
