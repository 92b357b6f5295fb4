"""GoogLeNet / Inception v1 (Szegedy et al., "Going Deeper with Convolutions", 2015).

Defaults reproduce torchvision's `googlenet` without the auxiliary heads:
conv+BN+ReLU units, a 1x1 reduction before the second stem conv, and a 3x3
kernel in the "5x5" branch (as torchvision and TF-slim ship it): 6,624,904
parameters at 1000 classes. `batch_norm=False, stem_reduce=False,
branch3_kernel=5` gives the paper's plain-conv layout. The MNN benchmark's
GoogLeNet (fedbench/conf/model/googlenet_mnn.yaml) is that layout with `stem_stride=2`
and `relu=False`: its source reuses the first conv's options for the second
stem conv, stride 2 included, so every inception module runs on a quarter of
the paper's feature map (14-7-4 instead of 28-14-7), and its convs have no
activation.
"""

from __future__ import annotations

from torch import Tensor, cat, nn

# (in, 1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool proj) per module, and
# where the stride-2 max-pools sit, as in the paper's Table 1.
_STAGE3 = ((192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64))
_STAGE4 = (
    (480, 192, 96, 208, 16, 48, 64),
    (512, 160, 112, 224, 24, 64, 64),
    (512, 128, 128, 256, 24, 64, 64),
    (512, 112, 144, 288, 32, 64, 64),
    (528, 256, 160, 320, 32, 128, 128),
)
_STAGE5 = ((832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128))


class _Unit(nn.Sequential):
    """Conv + (BN) + ReLU; with BN the conv drops its bias."""

    def __init__(
        self, cin: int, cout: int, kernel: int, batch_norm: bool, stride: int = 1, relu: bool = True
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, bias=not batch_norm)
        ]
        if batch_norm:
            layers.append(nn.BatchNorm2d(cout, eps=0.001))
        if relu:
            layers.append(nn.ReLU(inplace=True))
        super().__init__(*layers)


class Inception(nn.Module):
    def __init__(
        self,
        spec: tuple[int, int, int, int, int, int, int],
        batch_norm: bool,
        branch3_kernel: int,
        relu: bool = True,
    ) -> None:
        super().__init__()
        cin, c1, r3, c3, r5, c5, cp = spec

        def unit(cin: int, cout: int, kernel: int) -> _Unit:
            return _Unit(cin, cout, kernel, batch_norm, relu=relu)

        self.branch1 = unit(cin, c1, 1)
        self.branch2 = nn.Sequential(unit(cin, r3, 1), unit(r3, c3, 3))
        self.branch3 = nn.Sequential(unit(cin, r5, 1), unit(r5, c5, branch3_kernel))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), unit(cin, cp, 1))

    def forward(self, x: Tensor) -> Tensor:
        branches = [self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)]
        return cat(branches, dim=1)


class GoogLeNet(nn.Module):
    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        batch_norm: bool = True,
        stem_reduce: bool = True,
        branch3_kernel: int = 3,
        dropout: float = 0.2,
        stem_stride: int = 1,
        relu: bool = True,
    ) -> None:
        super().__init__()
        bn = batch_norm
        stem: list[nn.Module] = [
            _Unit(in_channels, 64, 7, bn, stride=2, relu=relu),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        ]
        if stem_reduce:
            stem.append(_Unit(64, 64, 1, bn, relu=relu))
        stem += [
            _Unit(64, 192, 3, bn, stride=stem_stride, relu=relu),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        ]
        body: list[nn.Module] = [Inception(s, bn, branch3_kernel, relu) for s in _STAGE3]
        body.append(nn.MaxPool2d(3, 2, ceil_mode=True))
        body += [Inception(s, bn, branch3_kernel, relu) for s in _STAGE4]
        body.append(nn.MaxPool2d(2, 2, ceil_mode=True))
        body += [Inception(s, bn, branch3_kernel, relu) for s in _STAGE5]
        self.features = nn.Sequential(*stem, *body, nn.AdaptiveAvgPool2d(1))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.dropout(self.features(x).flatten(1)))
