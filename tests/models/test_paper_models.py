"""Models of the seed papers: counts against the papers' tables and the layers' shapes."""

from __future__ import annotations

import pytest
import torch

from fedbench.errors import FedbenchError
from fedbench.models import build_model
from fedbench.models.char_cnn_lstm import CharCNNLSTM, LSTMLayer
from fedbench.models.dcgan import DCGANStep, gan_losses
from fedbench.models.layer_only import ConvOnly, DWConvOnly, FCOnly
from fedbench.models.reduced_mobilenet import ReducedMobileNet


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _conv(cin: int, cout: int, k: int, bias: bool = True) -> int:
    return cin * cout * k * k + (cout if bias else 0)


def _linear(fin: int, fout: int) -> int:
    return fin * fout + fout


# Seed paper 000, Table II "#Parameters", where it reports parameters.
@pytest.mark.parametrize(
    ("name", "paper", "rel"),
    [
        ("densenet40", 1e6, 0.05),
        ("vgg16", 134e6, 0.01),
        ("xception", 23e6, 0.01),
        ("alexnet", 60e6, 0.02),
    ],
)
def test_paper000_parameter_counts(name: str, paper: float, rel: float) -> None:
    module, _ = build_model(name)
    assert _count(module) == pytest.approx(paper, rel=rel)


# Where Table II's "#Parameters" is the fp32 size of the saved model in MiB
# (parameters and batch-norm statistics, as Keras' size column), not a count.
@pytest.mark.parametrize(("name", "paper_mib"), [("resnet50", 98), ("squeezenet", 5)])
def test_paper000_sizes_are_mebibytes(name: str, paper_mib: int) -> None:
    module, _ = build_model(name)
    state = [t for t in module.state_dict().values() if t.is_floating_point()]
    assert round(sum(t.numel() for t in state) * 4 / 2**20) == paper_mib


def test_dcgan_counts_and_step_semantics() -> None:
    module, shape = build_model("dcgan")
    assert isinstance(module, DCGANStep)
    g = _conv(100, 256, 4, False) + _conv(256, 128, 4, False) + _conv(128, 64, 4, False)
    g += _conv(64, 3, 4, False) + 2 * (256 + 128 + 64)  # + batch-norm affine
    d = _conv(3, 64, 4, False) + _conv(64, 128, 4, False) + _conv(128, 256, 4, False)
    d += _conv(256, 1, 4, False) + 2 * (128 + 256)
    assert _count(module.generator) == g == 1_068_928
    assert _count(module.discriminator) == d
    logits = module(torch.randn(4, *shape))
    assert logits.shape == (4, 3)
    # The detached and attached fake columns see the same images.
    assert torch.allclose(logits[:, 1], logits[:, 2])
    d_loss, g_loss = gan_losses(logits)
    (d_loss + g_loss).backward()
    assert all(p.grad is not None for p in module.generator.parameters())
    with pytest.raises(FedbenchError, match="num_classes"):
        build_model("dcgan", num_classes=10)
    with pytest.raises(FedbenchError, match="image_size"):
        DCGANStep(image_size=48)


def test_dqn_is_the_nature_network() -> None:
    module, shape = build_model("dqn")
    assert shape == (4, 84, 84)
    expected = _conv(4, 32, 8) + _conv(32, 64, 4) + _conv(64, 64, 3)
    expected += _linear(64 * 7 * 7, 512) + _linear(512, 18)
    assert _count(module) == expected


def test_char_lstm_matches_torch_lstm() -> None:
    torch.manual_seed(0)
    ours = LSTMLayer(6, 5)
    ref = torch.nn.LSTM(6, 5, batch_first=True)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.input_proj.weight)
        ref.bias_ih_l0.copy_(ours.input_proj.bias)
        ref.weight_hh_l0.copy_(ours.hidden_proj.weight)
        ref.bias_hh_l0.copy_(ours.hidden_proj.bias)
    x = torch.randn(3, 7, 6)
    assert torch.allclose(ours(x), ref(x)[0], atol=1e-6)
    assert _count(ours) == _count(ref)


def test_char_cnn_lstm_config() -> None:
    module, shape = build_model("char_cnn_lstm")
    assert isinstance(module, CharCNNLSTM)
    assert shape == (80,)
    expected = 80 * 8 + _conv(8, 128, 1) + 128 * 8 * 4  # embedding, width-5 conv1d
    expected += 2 * (4 * 256 * (128 + 256) + 8 * 256) - 4 * 256 * 128 + 4 * 256 * 256
    expected += _linear(256, 80)
    assert _count(module) == expected
    assert _count(module) == pytest.approx(1e6, rel=0.1)  # paper 000: "1M"
    assert module(torch.randint(0, 80, (2, 80))).shape == (2, 80)


def test_mentee_closest_geometry() -> None:
    module, _ = build_model("mentee")
    widths = [3, 64, 128, 256, 512, 512]
    convs = sum(_conv(a, b, 3) for a, b in zip(widths, widths[1:], strict=False))
    head = _linear(512 * 2 * 2, 4096) + _linear(4096, 4096) + _linear(4096, 10)
    assert _count(module) == convs + head
    # Paper 002 quotes 26.89M; the nearest geometry of its Table 2 is 8.3% above.
    assert _count(module) == pytest.approx(26.89e6, rel=0.09)


def _separable(cin: int, cout: int) -> int:
    return cin * 9 + 2 * cin + cin * cout + 2 * cout  # dw + BN, pw + BN


def test_reduced_mobilenet_table_and_text() -> None:
    module, _ = build_model("reduced_mobilenet")
    widths = [32, 64, 128, 128, 256, 256]
    expected = _conv(3, 32, 3, False) + 2 * 32
    expected += sum(_separable(a, b) for a, b in zip(widths, widths[1:], strict=False))
    expected += _linear(256 * 32 * 32, 10)
    assert _count(module) == expected
    # The text's 5.48M matches a last pointwise width of 512.
    wide = ReducedMobileNet(widths=(64, 128, 128, 256, 512))
    assert _count(wide) == pytest.approx(5.48e6, rel=0.01)


def test_reduced_resnet_shapes() -> None:
    module, _ = build_model("reduced_resnet")
    bn = 2
    convs = _conv(3, 16, 3, False) + _conv(16, 160, 3, False)
    convs += _conv(160, 320, 3, False) + _conv(320, 320, 3, False)
    convs += _conv(320, 640, 3, False) + _conv(640, 640, 3, False)
    projections = _conv(160, 320, 1, False) + _conv(320, 640, 1, False)
    norms = bn * (16 + 160 + 320 + 320 + 640 + 640 + 320 + 640)
    assert _count(module) == convs + projections + norms + _linear(640, 10)


# Paper 002 Table 4 (fully-connected-only): parameters per (depth, width).
TABLE4 = {
    (1, 64): 196e3, (1, 128): 393e3, (1, 256): 786e3, (1, 512): 1.57e6,
    (2, 64): 200e3, (2, 128): 409e3, (2, 256): 852.48e3, (2, 512): 1.84e6,
    (4, 64): 209e3, (4, 128): 442e3, (4, 256): 984e3, (4, 512): 2.36e6,
    (8, 64): 225e3, (8, 128): 508e3, (8, 256): 1.25e6, (8, 512): 3.41e6,
}  # fmt: skip

# Paper 002 Table 5 (convolution-only), the cells printed with three or more
# significant digits. Left out: (2,128) "15K", (2,512) "237M", (8,512) "537M"
# are misprints (151K, 2.37M, 16.5M), and the one- and two-digit cells
# ("1.7K", "1M", "4M", ...) are too coarse for a 1% check.
TABLE5 = {
    (2, 64): 38.7e3, (2, 256): 597e3, (4, 64): 112e3, (4, 128): 446e3,
    (4, 256): 1.78e6, (4, 512): 7.09e6, (8, 64): 260e3,
}  # fmt: skip


@pytest.mark.parametrize(("shape", "paper"), sorted(TABLE4.items()))
def test_fc_only_matches_table4(shape: tuple[int, int], paper: float) -> None:
    depth, width = shape
    assert _count(FCOnly(depth, width).features) == pytest.approx(paper, rel=0.01)


@pytest.mark.parametrize(("shape", "paper"), sorted(TABLE5.items()))
def test_conv_only_matches_table5(shape: tuple[int, int], paper: float) -> None:
    depth, width = shape
    assert _count(ConvOnly(depth, width).features) == pytest.approx(paper, rel=0.01)


def test_dwconv_only_layers() -> None:
    model = DWConvOnly(depth=3, width=64)
    first = 3 * 9 + 3 + _conv(3, 64, 1)
    rest = 64 * 9 + 64 + _conv(64, 64, 1)
    assert _count(model.features) == first + 2 * rest
    depthwise = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.groups > 1]
    assert len(depthwise) == 3
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_layer_only_relu_and_bad_sizes() -> None:
    assert any(isinstance(m, torch.nn.ReLU) for m in ConvOnly(2, 8, relu=True).modules())
    assert not any(isinstance(m, torch.nn.ReLU) for m in ConvOnly(2, 8).modules())
    with pytest.raises(FedbenchError, match="depth=0"):
        FCOnly(depth=0)
