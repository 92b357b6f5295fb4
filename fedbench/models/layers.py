"""Building blocks shared by the model families.

Only plain modules (conv, batch norm, activations, pooling, linear) so that a
workload measurer hooking torch's dispatcher sees every operator; no fused or
scripted kernels.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

# An activation class (nn.ReLU, nn.Hardswish, ...); called with or without inplace=True.
ActFactory = Callable[..., nn.Module]


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round a channel count the way the MobileNet/EfficientNet references do.

    The rounding rule (never drop more than 10%) is part of the reference
    architectures, so reproducing it is what makes parameter counts match.
    """
    floor = divisor if min_value is None else min_value
    rounded = max(floor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


class ConvNormAct(nn.Sequential):
    """Conv (no bias: the norm's shift replaces it) + BatchNorm + optional activation."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        groups: int = 1,
        act: ActFactory | None = nn.ReLU,
        eps: float = 1e-5,
        padding: int | None = None,
    ) -> None:
        pad = (kernel_size - 1) // 2 if padding is None else padding
        layers: list[nn.Module] = [
            nn.Conv2d(
                in_channels, out_channels, kernel_size, stride, pad, groups=groups, bias=False
            ),
            nn.BatchNorm2d(out_channels, eps=eps),
        ]
        if act is not None:
            # In place, as torchvision's Conv2dNormActivation: same saved
            # tensors, one activation-sized buffer less at the peak.
            layers.append(act(inplace=True))
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """Channel gating (Hu et al.): global pool, two 1x1 convs, a gate, a product."""

    def __init__(
        self, channels: int, squeeze_channels: int, act: ActFactory, gate: ActFactory
    ) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze_channels, 1)
        self.act = act()
        self.fc2 = nn.Conv2d(squeeze_channels, channels, 1)
        self.gate = gate()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))
        return x * scale


def init_conv_bn_linear(module: nn.Module) -> None:
    """He-normal convs, unit BN, small-normal linears: the usual CNN initialisation.

    PyTorch's default (Kaiming-uniform with a=sqrt(5)) trains deep plain CNNs
    noticeably slower from scratch, which matters for the FL training models.
    """
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d | nn.GroupNorm | nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
