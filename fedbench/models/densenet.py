"""DenseNet for CIFAR (Huang et al., "Densely Connected Convolutional Networks", 2017).

The original, non-bottleneck variant the seed paper trains: a 3x3 stem conv
with 16 channels, three dense blocks of (depth - 4) / 3 BN-ReLU-Conv3x3
layers each adding `growth_rate` channels, transitions BN-ReLU-Conv1x1-AvgPool
that keep the channel count (no compression), then BN-ReLU, global average
pooling and a linear head. depth=40, growth_rate=12 gives the paper's
DenseNet (L=40, k=12), about 1.0M parameters; depth=100 gives 7.0M.

Each layer concatenates its output to its input (torch.cat), so the
measured workload carries the real data-movement cost of dense connectivity.

`transitions` are the two transitions' output widths (default: their input
widths, no compression). A width-scaled submodel (fedbench.models.width)
passes ceil(r * k) as the growth rate and ceil(r * w) for the stem and each
transition; a layer's input is then the concatenation of ceil(r * .) slices
of each block it concatenates.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, cat, nn

from fedbench.errors import FedbenchError
from fedbench.models.layers import init_conv_bn_linear


class DenseLayer(nn.Module):
    def __init__(self, in_channels: int, growth_rate: int, drop_rate: float) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(in_channels, growth_rate, 3, padding=1, bias=False)
        self.drop = nn.Dropout(drop_rate) if drop_rate > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return cat([x, self.drop(self.conv(self.relu(self.norm(x))))], dim=1)


class Transition(nn.Sequential):
    def __init__(self, channels: int, out_channels: int) -> None:
        super().__init__(
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, out_channels, 1, bias=False),
            nn.AvgPool2d(2),
        )


class DenseNet(nn.Module):
    def __init__(
        self,
        depth: int = 40,
        growth_rate: int = 12,
        num_classes: int = 10,
        in_channels: int = 3,
        stem_channels: int = 16,
        drop_rate: float = 0.0,
        transitions: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        if depth < 7 or (depth - 4) % 3 != 0:
            raise FedbenchError(f"DenseNet depth={depth}: must be 3n+4 with n >= 1 (e.g. 40, 100)")
        layers_per_block = (depth - 4) // 3
        outs = (
            list(transitions)
            if transitions is not None
            else self.transition_widths(depth, growth_rate, stem_channels)
        )
        if len(outs) != 2 or min(outs) < 1:
            raise FedbenchError(f"DenseNet transitions={outs}: two widths >= 1")
        channels = stem_channels
        modules: list[nn.Module] = [nn.Conv2d(in_channels, channels, 3, padding=1, bias=False)]
        for block in range(3):
            for _ in range(layers_per_block):
                modules.append(DenseLayer(channels, growth_rate, drop_rate))
                channels += growth_rate
            if block < 2:
                modules.append(Transition(channels, outs[block]))
                channels = outs[block]
        modules += [nn.BatchNorm2d(channels), nn.ReLU(), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*modules)
        self.classifier = nn.Linear(channels, num_classes)
        init_conv_bn_linear(self)

    @staticmethod
    def transition_widths(
        depth: int = 40, growth_rate: int = 12, stem_channels: int = 16
    ) -> list[int]:
        """The transitions' widths when `transitions` is not given: no compression."""
        per_block = (depth - 4) // 3 * growth_rate
        return [stem_channels + per_block, stem_channels + 2 * per_block]

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
