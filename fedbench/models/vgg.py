"""VGG (Simonyan and Zisserman, 2015).

`layers` lists conv widths with "M" for 2x2 max-pools (VGG16 by default:
configuration D of the paper). The head is torchvision's: adaptive 7x7
average pooling, two 4096-unit hidden layers with dropout. At 224x224 input
VGG16 has 138,357,544 parameters with 1000 classes and 134,301,514 with 10,
the "134M" seed paper 000 lists for its CIFAR-10 runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG(nn.Module):
    def __init__(
        self,
        layers: Sequence[int | str] = VGG16,
        num_classes: int = 1000,
        in_channels: int = 3,
        batch_norm: bool = False,
        pool_size: int = 7,
        hidden: Sequence[int] = (4096, 4096),
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        modules: list[nn.Module] = []
        width = in_channels
        for item in layers:
            if item == "M":
                modules.append(nn.MaxPool2d(2, 2))
            elif isinstance(item, int) and item > 0:
                modules.append(nn.Conv2d(width, item, 3, padding=1, bias=not batch_norm))
                if batch_norm:
                    modules.append(nn.BatchNorm2d(item))
                modules.append(nn.ReLU())
                width = item
            else:
                raise FedbenchError(f"VGG layers: {item!r} is neither a positive width nor 'M'")
        self.features = nn.Sequential(*modules, nn.AdaptiveAvgPool2d(pool_size))
        head: list[nn.Module] = []
        features = width * pool_size * pool_size
        for h in hidden:
            head += [nn.Linear(features, h), nn.ReLU(), nn.Dropout(dropout)]
            features = h
        head.append(nn.Linear(features, num_classes))
        self.classifier = nn.Sequential(*head)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
