"""The reduced, eight-layer ResNet of seed paper 002 (Chen et al., SEC 2019, Table 2).

Wide-ResNet widths for 32x32 input: a 3x3 stem conv (16), a 3x3 conv to
160, then two residual blocks of two 3x3 convs, 160 -> 320 (stride 2) and
320 -> 640 (stride 2), with 1x1 projection shortcuts; an 8x8 average pool
and a linear head. Six convs + pool + linear are the table's eight rows;
the residual grouping and BN + ReLU (post-activation) follow He et al.,
since the table gives only the convs. 7.2M parameters (the paper quotes
none).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.models.layers import ConvNormAct


class ResidualPair(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            ConvNormAct(cin, cout, 3, stride), ConvNormAct(cout, cout, 3, act=None)
        )
        self.shortcut: nn.Module = (
            nn.Identity()
            if stride == 1 and cin == cout
            else ConvNormAct(cin, cout, 1, stride, act=None)
        )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ReducedResNet(nn.Module):
    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 3,
        stem_width: int = 16,
        widths: Sequence[int] = (160, 320, 640),
    ) -> None:
        super().__init__()
        first, *rest = widths
        layers: list[nn.Module] = [
            ConvNormAct(in_channels, stem_width, 3),
            ConvNormAct(stem_width, first, 3),
        ]
        cin = first
        for width in rest:
            layers.append(ResidualPair(cin, width, 2))
            cin = width
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))
