"""AlexNet (Krizhevsky et al., 2012), single-tower form.

Defaults reproduce torchvision's `alexnet` (the "one weird trick" variant:
64-192-384-256-256 channels, adaptive 6x6 pooling, two 4096-unit hidden
layers): 61,100,840 parameters at 1000 classes. The parameters also express
the MNN benchmark AlexNet that the Meizu calibration rows were measured
with (96-256-384-384-256 channels, unpadded first conv, one 4096 hidden
layer, no adaptive pooling), see fedbench/conf/model/alexnet_mnn.yaml.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError


class AlexNet(nn.Module):
    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        input_size: int = 224,
        channels: Sequence[int] = (64, 192, 384, 256, 256),
        conv1_padding: int = 2,
        pool_size: int | None = 6,
        hidden: Sequence[int] = (4096, 4096),
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if len(channels) != 5:
            raise FedbenchError(f"AlexNet channels={list(channels)}: give five conv widths")
        c1, c2, c3, c4, c5 = channels
        relu = nn.ReLU
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 11, stride=4, padding=conv1_padding),
            relu(),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(c1, c2, 5, padding=2),
            relu(),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(c2, c3, 3, padding=1),
            relu(),
            nn.Conv2d(c3, c4, 3, padding=1),
            relu(),
            nn.Conv2d(c4, c5, 3, padding=1),
            relu(),
            nn.MaxPool2d(3, 2),
        )
        if pool_size is None:
            # Without adaptive pooling the head's width follows the input size.
            size = (input_size + 2 * conv1_padding - 11) // 4 + 1
            for _ in range(3):
                size = (size - 3) // 2 + 1
            self.pool: nn.Module = nn.Identity()
        else:
            size = pool_size
            self.pool = nn.AdaptiveAvgPool2d(pool_size)
        if size < 1:
            raise FedbenchError(f"AlexNet input_size={input_size} is too small")
        layers: list[nn.Module] = []
        width = c5 * size * size
        for h in hidden:
            layers += [nn.Dropout(dropout), nn.Linear(width, h), relu()]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.classifier = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))
