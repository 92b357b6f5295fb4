"""LeNet (LeCun et al., 1998) for 1x28x28 digits.

Two 5x5 conv + ReLU + 2x2 max-pool stages and a stack of linear layers.
The defaults are the classic LeNet-5 shapes (6 and 16 channels, 120-84
hidden units, first conv padded so a 28x28 input gives the 5x5x16 = 400
features of the original 32x32 design): 61,706 parameters. The same family
with channels (20, 50), no padding and one 500-unit hidden layer is the
Caffe "LeNet" (431,080 parameters); MNN's benchmark version
(fedbench/conf/model/lenet_mnn.yaml) has a 400-unit hidden layer, no activation
after its convs, and never registers its second conv with the module, so
that conv's weights are constants the optimizer does not see
(`constant_convs=[1]`: buffers here, not parameters).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError


class LeNet(nn.Module):
    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 1,
        input_size: int = 28,
        channels: Sequence[int] = (6, 16),
        hidden: Sequence[int] = (120, 84),
        padding: int = 2,
        dropout: float = 0.0,
        conv_relu: bool = True,
        constant_convs: Sequence[int] = (),
    ) -> None:
        super().__init__()
        if len(channels) != 2:
            raise FedbenchError(f"LeNet channels={list(channels)}: give exactly two conv widths")
        c1, c2 = channels
        size = ((input_size + 2 * padding - 4) // 2 - 4) // 2
        if size < 1:
            raise FedbenchError(f"LeNet input_size={input_size} is too small for two 5x5 stages")
        if not set(constant_convs) <= {0, 1}:
            raise FedbenchError(
                f"LeNet constant_convs={list(constant_convs)}: valid indices are 0 and 1"
            )
        convs = [nn.Conv2d(in_channels, c1, 5, padding=padding), nn.Conv2d(c1, c2, 5)]
        for i in constant_convs:
            _as_constants(convs[i])
        act = nn.ReLU if conv_relu else nn.Identity
        self.features = nn.Sequential(
            convs[0], act(), nn.MaxPool2d(2), convs[1], act(), nn.MaxPool2d(2)
        )
        layers: list[nn.Module] = []
        width = c2 * size * size
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.classifier = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def _as_constants(module: nn.Module) -> None:
    """Turn a module's parameters into buffers: used in the forward pass, never trained."""
    for name, param in list(module.named_parameters(recurse=False)):
        del module._parameters[name]
        module.register_buffer(name, param.detach())
