"""A tiny CNN (about 24k parameters at the defaults) for fast tests and smoke runs.

Three 3x3 conv + ReLU stages (two followed by 2x2 max-pooling), global average
pooling and a linear head. The adaptive pooling makes it accept any input of
at least 16x16 pixels (fewer would pool a 1-pixel map away), with any number
of channels.
"""

from __future__ import annotations

from torch import Tensor, nn

from fedbench.models.layers import init_conv_bn_linear


class SmallCNN(nn.Module):
    def __init__(self, in_channels: int = 3, num_classes: int = 10, width: int = 16) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, w, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(4 * w, num_classes)
        init_conv_bn_linear(self)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
