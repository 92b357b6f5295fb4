"""SqueezeNet (Iandola et al., 2016), versions 1.0 and 1.1.

Fire modules (1x1 squeeze, parallel 1x1 and 3x3 expands, concatenated) and a
1x1-conv classifier with global average pooling, as in torchvision:
1,248,424 parameters for 1.0 and 1,235,496 for 1.1 at 1000 classes.
`stem_padding` pads the first conv; 3 gives the "SAME" geometry of the MNN
benchmark SqueezeNet (112-56-28-14 feature maps at 224 input), whose convs
also have no activation (`relu=False`).
"""

from __future__ import annotations

from torch import Tensor, cat, nn

from fedbench.errors import FedbenchError, choices

# Per version: stem (channels, kernel), then the sequence of Fire modules as
# (squeeze, expand1x1, expand3x3), with "M" for a 3x3 stride-2 max-pool.
_Layout = tuple[tuple[int, int], tuple[tuple[int, int, int] | str, ...]]
_LAYOUTS: dict[str, _Layout] = {
    "1_0": (
        (96, 7),
        ("M", (16, 64, 64), (16, 64, 64), (32, 128, 128), "M", (32, 128, 128),
         (48, 192, 192), (48, 192, 192), (64, 256, 256), "M", (64, 256, 256)),
    ),
    "1_1": (
        (64, 3),
        ("M", (16, 64, 64), (16, 64, 64), "M", (32, 128, 128), (32, 128, 128), "M",
         (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)),
    ),
}  # fmt: skip


def _act(relu: bool, inplace: bool = True) -> nn.Module:
    return nn.ReLU(inplace=inplace) if relu else nn.Identity()


class Fire(nn.Module):
    def __init__(
        self, cin: int, squeeze: int, expand1: int, expand3: int, relu: bool = True
    ) -> None:
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), _act(relu))
        self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand1, 1), _act(relu))
        self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand3, 3, padding=1), _act(relu))

    def forward(self, x: Tensor) -> Tensor:
        s = self.squeeze(x)
        return cat([self.expand1(s), self.expand3(s)], dim=1)


class SqueezeNet(nn.Module):
    def __init__(
        self,
        version: str = "1_0",
        num_classes: int = 1000,
        in_channels: int = 3,
        stem_padding: int = 0,
        dropout: float = 0.5,
        relu: bool = True,
    ) -> None:
        super().__init__()
        if version not in _LAYOUTS:
            raise FedbenchError(f"SqueezeNet version={version!r}: valid: {choices(_LAYOUTS)}")
        (stem_channels, stem_kernel), layout = _LAYOUTS[version]
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, stem_channels, stem_kernel, 2, stem_padding),
            _act(relu, inplace=False),
        ]
        width = stem_channels
        for item in layout:
            if isinstance(item, str):
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
            else:
                layers.append(Fire(width, *item, relu=relu))
                width = item[1] + item[2]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout),
            nn.Conv2d(width, num_classes, 1),
            _act(relu, inplace=False),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x)).flatten(1)
