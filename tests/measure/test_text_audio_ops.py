"""Text and audio workloads are costed like CNNs: embeddings, fused RNNs, conv1d, unknown ops."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from fedbench.measure.opclasses import UncostedOpWarning
from fedbench.measure.workload import measure_workload
from fedbench.models.char_cnn_lstm import LSTMLayer

BATCH, STEPS, INPUTS, HIDDEN = 4, 6, 8, 16


class Recurrent(nn.Module):
    """One recurrent layer over (batch, steps, inputs), its last step as the output.

    A linear layer in front makes the recurrent layer's input gradient needed,
    as it is behind an embedding or a convolution.
    """

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.pre = nn.Linear(INPUTS, INPUTS)
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layer(self.pre(x))
        return (out[0] if isinstance(out, tuple) else out)[:, -1]


def _measure(
    model: nn.Module, shape: tuple[int, ...], **kw: object
) -> tuple[float, float, list[str]]:
    """(forward dense FLOPs, backward dense FLOPs, warnings) of one measured step."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = measure_workload(model, shape, BATCH, model_name="t", cache=False, **kw)  # type: ignore[arg-type]
    messages = [str(c.message) for c in caught if issubclass(c.category, UncostedOpWarning)]
    return w.forward["dense"].flops, w.backward["dense"].flops, messages


def _gemm_flops(gates: int) -> float:
    """The recurrent layer's GEMMs plus the linear layer's in front."""
    return 2.0 * BATCH * STEPS * (gates * HIDDEN * (INPUTS + HIDDEN) + INPUTS * INPUTS)


@pytest.mark.parametrize(("cls", "gates"), [(nn.LSTM, 4), (nn.GRU, 3)])
def test_fused_and_decomposed_rnns_are_charged_their_gemms(
    cls: type[nn.Module], gates: int
) -> None:
    # nn.LSTM may run as oneDNN's one fused call (mkldnn_rnn_layer), nn.GRU as
    # per-step GEMMs: either way its GEMMs are counted, not ~0 as an elementwise op.
    torch.manual_seed(0)
    model = Recurrent(cls(INPUTS, HIDDEN, batch_first=True))
    forward, backward, caught = _measure(model, (STEPS, INPUTS))
    assert forward == pytest.approx(_gemm_flops(gates), rel=0.25)
    assert backward == pytest.approx(2 * _gemm_flops(gates), rel=0.25)
    assert not caught


def test_fused_lstm_matches_the_written_out_one() -> None:
    torch.manual_seed(0)
    fused = _measure(Recurrent(nn.LSTM(INPUTS, HIDDEN, batch_first=True)), (STEPS, INPUTS))
    written = _measure(Recurrent(LSTMLayer(INPUTS, HIDDEN)), (STEPS, INPUTS))
    assert fused[0] == pytest.approx(written[0], rel=0.25)
    assert fused[1] == pytest.approx(written[1], rel=0.25)


def test_embedding_and_its_gradient_are_charged() -> None:
    model = nn.Sequential(nn.Embedding(50, 8), nn.Flatten(), nn.Linear(8 * STEPS, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = measure_workload(
            model,
            (STEPS,),
            BATCH,
            model_name="e",
            cache=False,
            input_dtype=torch.int64,
            input_high=50,
        )
    assert not [c for c in caught if issubclass(c.category, UncostedOpWarning)]
    assert w.forward["movement"].bytes > 0  # the gather of rows
    # The gradient's scatter-add into the 50 x 8 table does arithmetic.
    assert w.backward["elementwise"].flops >= 50 * 8


def test_conv1d_is_a_dense_convolution() -> None:
    model = nn.Sequential(
        nn.Conv1d(INPUTS, HIDDEN, 5, padding=2), nn.Flatten(), nn.Linear(HIDDEN * 20, 3)
    )
    forward, backward, _ = _measure(model, (INPUTS, 20))
    conv = 2.0 * BATCH * 20 * HIDDEN * INPUTS * 5
    assert forward == pytest.approx(conv + 2.0 * BATCH * HIDDEN * 20 * 3)
    assert backward >= conv  # the weight gradient (the first layer's input needs none)


@torch.library.custom_op("fedbench_test::double", mutates_args=())
def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_double.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _double_backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
    return grad * 2


_double.register_autograd(_double_backward)


class Custom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(INPUTS, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(_double(x))


def test_an_op_without_a_rule_is_warned_about_in_one_line_and_still_charged() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = measure_workload(Custom(), (INPUTS,), BATCH, model_name="c", cache=False)
    messages = [str(c.message) for c in caught if issubclass(c.category, UncostedOpWarning)]
    assert messages and all("\n" not in m for m in messages)
    assert any("fedbench_test::double" in m for m in messages)
    # Charged as elementwise (one FLOP per element), never as free.
    assert w.forward["elementwise"].flops >= BATCH * INPUTS
