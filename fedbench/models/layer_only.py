"""Single-kind layer stacks of seed paper 002 (Chen et al., SEC 2019, section 4.3).

`FCOnly`, `ConvOnly` and `DWConvOnly` stack `depth` layers of one kind and
`width` units/channels on CIFAR input, with no activation and no pooling,
to isolate how one layer type scales with depth and width. The `features`
stack is what the paper's Tables 4 and 5 count; a small head (linear for
FCOnly, global average pool + linear for the conv stacks) only turns the
last map into class logits so the stack can train with a classification
loss. `relu=True` adds ReLUs between layers for comparison.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from fedbench.errors import FedbenchError


def _check(depth: int, width: int) -> None:
    if depth < 1 or width < 1:
        raise FedbenchError(f"depth={depth} and width={width} must both be >= 1")


def _stack(depth: int, layer: Callable[[int], nn.Module], relu: bool) -> list[nn.Module]:
    modules: list[nn.Module] = []
    for i in range(depth):
        if relu and i > 0:
            modules.append(nn.ReLU())
        modules.append(layer(i))
    return modules


class FCOnly(nn.Module):
    def __init__(
        self,
        depth: int = 4,
        width: int = 256,
        num_classes: int = 10,
        in_features: int = 3 * 32 * 32,
        relu: bool = False,
    ) -> None:
        super().__init__()
        _check(depth, width)
        self.features = nn.Sequential(
            nn.Flatten(),
            *_stack(depth, lambda i: nn.Linear(in_features if i == 0 else width, width), relu),
        )
        self.classifier = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))


class ConvOnly(nn.Module):
    def __init__(
        self,
        depth: int = 4,
        width: int = 128,
        num_classes: int = 10,
        in_channels: int = 3,
        kernel_size: int = 3,
        relu: bool = False,
    ) -> None:
        super().__init__()
        _check(depth, width)
        pad = kernel_size // 2
        self.features = nn.Sequential(
            *_stack(
                depth,
                lambda i: nn.Conv2d(in_channels if i == 0 else width, width, kernel_size, 1, pad),
                relu,
            )
        )
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, num_classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))


class DepthwiseSeparable(nn.Sequential):
    """Depthwise k x k then pointwise 1x1 (Howard et al., MobileNets)."""

    def __init__(self, cin: int, cout: int, kernel_size: int) -> None:
        super().__init__(
            nn.Conv2d(cin, cin, kernel_size, 1, kernel_size // 2, groups=cin),
            nn.Conv2d(cin, cout, 1),
        )


class DWConvOnly(nn.Module):
    def __init__(
        self,
        depth: int = 4,
        width: int = 128,
        num_classes: int = 10,
        in_channels: int = 3,
        kernel_size: int = 3,
        relu: bool = False,
    ) -> None:
        super().__init__()
        _check(depth, width)
        self.features = nn.Sequential(
            *_stack(
                depth,
                lambda i: DepthwiseSeparable(in_channels if i == 0 else width, width, kernel_size),
                relu,
            )
        )
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, num_classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))
