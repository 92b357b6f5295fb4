"""ResNet (He et al., "Deep Residual Learning for Image Recognition", 2016).

`layers` gives the blocks per stage ([2, 2, 2, 2] basic blocks for ResNet18,
[3, 4, 6, 3] bottlenecks for ResNet50). The ImageNet stem (7x7/2 conv +
3x3/2 max-pool) matches torchvision: 11,689,512 and 25,557,032 parameters
at 1000 classes. `cifar_stem=True` swaps in a 3x3/1 conv without pooling for
32x32 inputs, the usual CIFAR adaptation (ResNet50 then has 23,520,842
parameters at 10 classes). Downsampling sits on the 3x3 conv of a
bottleneck ("ResNet v1.5"), as in torchvision.

`widths` are the stages' planes (default `width` * 2**stage: 64, 128, 256,
512) and the stem is the first of them, as in HeteroFL's ResNet; a
bottleneck's output is 4x its planes. A width-scaled submodel
(fedbench.models.width) passes each ceil(r * planes).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = _shortcut(cin, planes * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = _shortcut(cin, planes * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(
        self,
        layers: Sequence[int] = (2, 2, 2, 2),
        bottleneck: bool = False,
        num_classes: int = 1000,
        in_channels: int = 3,
        cifar_stem: bool = False,
        width: int = 64,
        widths: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        if len(layers) == 0 or min(layers) < 1:
            raise FedbenchError(f"ResNet layers={list(layers)}: give >= 1 block per stage")
        planes_of = list(widths) if widths is not None else self.stage_widths(layers, width)
        if len(planes_of) != len(layers) or min(planes_of) < 1:
            raise FedbenchError(
                f"ResNet widths={planes_of}: one width >= 1 per stage of layers={list(layers)}"
            )
        width = planes_of[0]  # the stem's
        block: type[BasicBlock] | type[Bottleneck] = Bottleneck if bottleneck else BasicBlock
        if cifar_stem:
            stem: list[nn.Module] = [
                nn.Conv2d(in_channels, width, 3, 1, 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
            ]
        else:
            stem = [
                nn.Conv2d(in_channels, width, 7, 2, 3, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            ]
        blocks: list[nn.Module] = []
        cin = width
        for stage, count in enumerate(layers):
            planes = planes_of[stage]
            for i in range(count):
                blocks.append(block(cin, planes, 2 if stage > 0 and i == 0 else 1))
                cin = planes * block.expansion
        self.features = nn.Sequential(*stem, *blocks, nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    @staticmethod
    def stage_widths(layers: Sequence[int], width: int = 64) -> list[int]:
        """The stages' planes when `widths` is not given: `width` doubling per stage."""
        return [width * 2**stage for stage in range(len(layers))]

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x).flatten(1))
