"""A small keyword-spotting CNN on log-mel features (~245k parameters at the defaults).

Input: (batch, 1, mel bands, frames), e.g. Speech Commands' (1, 40, 101)
(fedbench.data.speech_commands). Four 3x3 conv + BatchNorm + ReLU stages,
the first three followed by 2x2 max-pooling, then a global average pool
over frequency and time and a linear head. This is the shape of the small
KWS CNNs (Sainath & Parada 2015's cnn-trad-fpool3 and its successors) at a
size a phone trains in a federated round: the global pool makes the model
independent of the clip length, and the parameters sit in the convolutions,
not in a head over a flattened spectrogram (cnn-trad-fpool3's linear layer
alone has ~1M).

Only plain operators (conv2d, batch norm, ReLU, pools, linear), so the
workload measurer sees every FLOP, and the layers sit in the `features` /
`classifier` containers that the memory planner checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from fedbench.errors import FedbenchError
from fedbench.models.layers import init_conv_bn_linear


class AudioCNN(nn.Module):
    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 35,
        widths: Sequence[int] = (32, 64, 128, 128),
    ) -> None:
        super().__init__()
        if not widths or min(widths) < 1:
            raise FedbenchError(
                f"audio_cnn: widths={list(widths)!r} must be positive channel counts"
            )
        layers: list[nn.Module] = []
        previous = in_channels
        for i, width in enumerate(widths):
            layers += [
                nn.Conv2d(previous, width, 3, padding=1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
            ]
            if i < len(widths) - 1:
                layers.append(nn.MaxPool2d(2))
            previous = width
        layers.append(nn.AdaptiveAvgPool2d(1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(previous, num_classes)
        init_conv_bn_linear(self)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))
