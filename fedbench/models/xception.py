"""Xception (Chollet, "Xception: Deep Learning with Depthwise Separable Convolutions", 2017).

The paper's (and Keras') layout for 299x299 input: entry flow with three
strided residual blocks (128, 256, 728), eight middle-flow blocks of three
728-channel separable convs, an exit block (728 -> 1024) and separable convs
to 1536 and 2048, global pooling and a linear head. Separable convs are a
depthwise 3x3 and a pointwise 1x1, both without bias, each followed by BN:
22,855,952 parameters at 1000 classes (Keras' 22.9M counts BN statistics
too), the "23M" of seed paper 000.
"""

from __future__ import annotations

from torch import Tensor, nn


class SeparableConv(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False),
            nn.Conv2d(cin, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )


class XceptionBlock(nn.Module):
    """ReLU-SepConv units with a residual; a strided block ends in a max-pool."""

    def __init__(self, widths: list[int], cin: int, strided: bool, relu_first: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = cin
        for i, w in enumerate(widths):
            if i > 0 or relu_first:
                # Not in place: the block's input is also the residual's input.
                layers.append(nn.ReLU(inplace=i > 0))
            layers.append(SeparableConv(width, w))
            width = w
        if strided:
            layers.append(nn.MaxPool2d(3, 2, 1))
            self.shortcut: nn.Module = nn.Sequential(
                nn.Conv2d(cin, width, 1, 2, bias=False), nn.BatchNorm2d(width)
            )
        else:
            self.shortcut = nn.Identity()
        self.body = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x) + self.shortcut(x)


class Xception(nn.Module):
    def __init__(
        self, num_classes: int = 1000, in_channels: int = 3, middle_blocks: int = 8
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, 32, 3, 2, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            # The first block follows a ReLU already: it starts with its conv.
            XceptionBlock([128, 128], 64, strided=True, relu_first=False),
            XceptionBlock([256, 256], 128, strided=True, relu_first=True),
            XceptionBlock([728, 728], 256, strided=True, relu_first=True),
        ]
        layers += [
            XceptionBlock([728, 728, 728], 728, strided=False, relu_first=True)
            for _ in range(middle_blocks)
        ]
        layers += [
            XceptionBlock([728, 1024], 728, strided=True, relu_first=True),
            SeparableConv(1024, 1536),
            nn.ReLU(),
            SeparableConv(1536, 2048),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        ]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x).flatten(1))
