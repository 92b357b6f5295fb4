"""The reduced, six-layer MobileNet of seed paper 002 (Chen et al., SEC 2019, Table 2).

A 3x3 conv (32) and five depthwise-separable layers (depthwise 3x3 +
pointwise 1x1 to 64, 128, 128, 256, 256), each conv with BN + ReLU as in
MobileNet, at full 32x32 resolution (CIFAR input; the table has no strides),
then a 7x7 average pool (stride 1, "SAME") and a linear layer over the
flattened map. As tabulated that is 2.75M parameters, nearly all in the
linear layer; the paper's text says "around 5.48 million", which a last
pointwise width of 512 reproduces (5.44M): `widths` lets one choose.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.models.layers import ConvNormAct


class ReducedMobileNet(nn.Module):
    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 3,
        input_size: int = 32,
        stem_width: int = 32,
        widths: Sequence[int] = (64, 128, 128, 256, 256),
        pool_size: int = 7,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvNormAct(in_channels, stem_width, 3)]
        cin = stem_width
        for width in widths:
            layers += [ConvNormAct(cin, cin, 3, groups=cin), ConvNormAct(cin, width, 1)]
            cin = width
        layers += [
            nn.AvgPool2d(pool_size, 1, pool_size // 2, count_include_pad=False),
            nn.Flatten(),
        ]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin * input_size * input_size, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))
