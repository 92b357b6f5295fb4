"""Character-level CNN + LSTM language model (seed paper 000's "Char-CNN", Shakespeare).

Input: a batch of character-id sequences, int64 of shape (batch, seq_len)
with ids in [0, vocab_size). An embedding, 1-D convolutions over the
characters (the "CONV" part), a stack of LSTM layers and a linear head on
the last step predict the next character: the LEAF Shakespeare task (80
characters in, next character out, vocab 80). Defaults: 8-dim embedding, one
128-channel width-5 conv, two 256-unit LSTM layers: about 0.95M parameters
(the paper lists 1M). The model YAML describes the input with
`input_shape: [seq_len]`, `input_dtype: int64` and `input_high: vocab_size`.

The LSTM is written out (one matmul for all input projections, then per
step a hidden matmul and the gate nonlinearities) instead of nn.LSTM: on
CPU nn.LSTM may dispatch to a fused oneDNN kernel whose FLOPs and saved
tensors a dispatcher-level workload measurer cannot see. Parameter layout
and count equal nn.LSTM's (two bias vectors per layer).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class LSTMLayer(nn.Module):
    """One unidirectional LSTM layer over (batch, time, features), batch-first."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.input_proj = nn.Linear(input_size, 4 * hidden_size)
        self.hidden_proj = nn.Linear(hidden_size, 4 * hidden_size)

    def forward(self, x: Tensor) -> Tensor:
        batch, steps, _ = x.shape
        gates_in = self.input_proj(x)  # all time steps at once, as cuDNN does
        h = x.new_zeros(batch, self.hidden_size)
        c = x.new_zeros(batch, self.hidden_size)
        outputs = []
        for t in range(steps):
            gates = gates_in[:, t] + self.hidden_proj(h)
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs, dim=1)


class Transpose(nn.Module):
    """Swap time and channel axes between the conv (B, C, T) and LSTM (B, T, C) layouts."""

    def forward(self, x: Tensor) -> Tensor:
        return x.transpose(1, 2)


class LastStep(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x[:, -1]


class CharCNNLSTM(nn.Module):
    def __init__(
        self,
        vocab_size: int = 80,
        num_classes: int = 80,
        embed_dim: int = 8,
        conv_channels: Sequence[int] = (128,),
        kernel_size: int = 5,
        hidden_size: int = 256,
        lstm_layers: int = 2,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Embedding(vocab_size, embed_dim), Transpose()]
        width = embed_dim
        for channels in conv_channels:
            layers += [
                nn.Conv1d(width, channels, kernel_size, padding=kernel_size // 2),
                nn.ReLU(),
            ]
            width = channels
        layers.append(Transpose())
        for _ in range(lstm_layers):
            layers.append(LSTMLayer(width, hidden_size))
            width = hidden_size
        layers.append(LastStep())
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x))
