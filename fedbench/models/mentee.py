"""The Mentee network of seed paper 002 (Chen et al., SEC 2019, Table 2), for 32x32 CIFAR.

Five 3x3 convs (64, 128, 256, 512, 512) with ReLU, a 2x2 average pool, and
fully connected layers 4096-4096-classes. The table lists no other pooling,
so downsampling sits in the convs: `strides` (2, 2, 2, 1, 1) leave a 4x4 map,
pooled to 2x2x512 = 2048 features, for 29.1M parameters. The paper quotes
"around 26.89 million", which no geometry of the listed layers reaches
(strides on four convs give 22.8M); 29.1M is the closest.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError


class Mentee(nn.Module):
    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 3,
        input_size: int = 32,
        widths: Sequence[int] = (64, 128, 256, 512, 512),
        strides: Sequence[int] = (2, 2, 2, 1, 1),
        hidden: Sequence[int] = (4096, 4096),
    ) -> None:
        super().__init__()
        if len(widths) != len(strides):
            raise FedbenchError(
                f"Mentee widths={list(widths)} and strides={list(strides)} differ in length"
            )
        layers: list[nn.Module] = []
        cin, size = in_channels, input_size
        for width, stride in zip(widths, strides, strict=True):
            layers += [nn.Conv2d(cin, width, 3, stride, 1), nn.ReLU()]
            cin, size = width, (size - 1) // stride + 1
        size //= 2
        if size < 1:
            raise FedbenchError(f"Mentee input_size={input_size} is too small for strides")
        layers += [nn.AvgPool2d(2), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        head: list[nn.Module] = []
        features = cin * size * size
        for h in hidden:
            head += [nn.Linear(features, h), nn.ReLU()]
            features = h
        head.append(nn.Linear(features, num_classes))
        self.classifier = nn.Sequential(*head)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))
