"""A tiny CNN (about 34k parameters at the defaults) for fast tests and smoke runs.

Three 3x3 conv + BatchNorm + ReLU stages (two followed by 2x2 max-pooling),
4x4 average pooling and a linear head. The 4x4 map keeps where the strokes
are (a digit is its layout; a global pool loses it) and BatchNorm lets it
learn in one or two epochs, which is what smoke runs and end-to-end tests
have time for. The adaptive pooling accepts any input of at least 16x16
pixels, with any number of channels.
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
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1),
            nn.BatchNorm2d(2 * w),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1),
            nn.BatchNorm2d(4 * w),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.classifier = nn.Linear(4 * w * 16, num_classes)
        init_conv_bn_linear(self)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
