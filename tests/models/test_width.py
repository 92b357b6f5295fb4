"""Width-scaled submodels: their shapes, their slices of the full model, per-entry averaging."""

from __future__ import annotations

import pytest
import torch

from fedbench.errors import FedbenchError
from fedbench.models import input_spec, model_config
from fedbench.models.width import (
    Extraction,
    WidthRule,
    aggregate,
    build_at,
    extract,
    indices,
    width_rule,
)

TINY = WidthRule(widths=())  # the rule only supplies blocks; shapes come from the test


def test_hand_computed_average_of_rates_1_and_half() -> None:
    # A tiny layer: 4 outputs x 2 inputs (inputs stay full) and 4 biases.
    full = {"w": torch.zeros(4, 2), "b": torch.full((4,), 9.0)}
    whole = indices(full, {"w": (4, 2), "b": (4,)}, TINY, Extraction())
    half = indices(full, {"w": (2, 2), "b": (2,)}, TINY, Extraction())
    a = {"w": torch.ones(4, 2), "b": torch.ones(4)}  # rate 1, 1 example
    b = {"w": torch.full((2, 2), 5.0), "b": torch.full((2,), 5.0)}  # rate 1/2, 3 examples
    merged = aggregate(full, [(whole, a, 1.0), (half, b, 3.0)])
    # Rows 0-1 are held by both: (1 * 1 + 3 * 5) / 4 = 4; rows 2-3 only by a: 1.
    assert merged["w"].tolist() == [[4.0, 4.0], [4.0, 4.0], [1.0, 1.0], [1.0, 1.0]]
    assert merged["b"].tolist() == [4.0, 4.0, 1.0, 1.0]
    # Only half-rate devices: rows 2-3 were held by nobody and keep the global value.
    alone = aggregate(full, [(half, b, 3.0)])
    assert alone["b"].tolist() == [5.0, 5.0, 9.0, 9.0]
    assert alone["w"][2:].eq(0).all()


def test_rolling_window_wraps_and_blocks_move_whole() -> None:
    full = {"fc": torch.arange(8.0).reshape(1, 8)}  # 4 channels x 2 features each
    rule = WidthRule(widths=(), blocks={"fc": {1: 2}})
    idx = indices(full, {"fc": (1, 4)}, rule, Extraction("rolling", offset=3))
    # Channels 3 and 0 (the window wraps), each as its two features.
    assert extract(full, idx)["fc"].tolist() == [[6.0, 7.0, 0.0, 1.0]]
    first = indices(full, {"fc": (1, 4)}, rule, Extraction("first"))
    assert extract(full, first)["fc"].tolist() == [[0.0, 1.0, 2.0, 3.0]]


def test_small_cnn_submodel_shapes() -> None:
    shapes = {
        k: tuple(v.shape) for k, v in build_at(model_config("small_cnn"), 0.25).state_dict().items()
    }
    assert shapes["features.0.weight"] == (4, 3, 3, 3)  # ceil(16 / 4); 3 input channels full
    assert shapes["classifier.weight"] == (10, 16 * 4 * 4)  # the classes stay full


@pytest.mark.parametrize(
    "name",
    [
        "small_cnn",
        "lenet",
        "lenet_mnn",
        "reduced_mobilenet",
        "alexnet_mnn",
        "reduced_resnet",
        "resnet18",
        "resnet50_cifar",
        "mobilenetv2",
        "mobilenetv3_small",
        "densenet40",
        # 1/16: MobileNetV3's 40- and 48-wide blocks both become 3 wide (no new
        # residual may appear); DenseNet's transitions (ceil(160 / 16) = 10) then
        # differ from their inputs (1 + 12 x 1).
        pytest.param(("mobilenetv3_small", 0.0625), id="mobilenetv3_small@1/16"),
        pytest.param(("densenet40", 0.0625), id="densenet40@1/16"),
    ],
)
def test_a_submodel_is_a_slice_that_computes_the_same(name: str | tuple[str, float]) -> None:
    name, rate = (name, 0.25) if isinstance(name, str) else name
    cfg = model_config(name)
    torch.manual_seed(0)
    # In float64, so that the outputs may be compared far below how much they vary.
    big = build_at(cfg, 1.0).double().eval()
    whole = {k: v.clone() for k, v in big.state_dict().items()}
    small = build_at(cfg, rate).double().eval()
    shapes = {k: tuple(v.shape) for k, v in small.state_dict().items()}
    out = [k for k, v in shapes.items() if len(v) == 2][-1]  # the output layer
    assert shapes[out][0] == whole[out].shape[0]  # the classes stay full
    x = input_spec(name).example(2).double()
    for how in (Extraction("first"), Extraction("rolling", offset=5)):
        idx = indices(whole, shapes, width_rule(cfg), how)
        small.load_state_dict(extract(whole, idx))
        # The submodel's BatchNorm statistics measured on inputs (the full model gets
        # them too, below): with the initial ones (mean 0, var 1) the MobileNets'
        # features vanish (~1e-9) and any slicing would "compute the same".
        torch.optim.swa_utils.update_bn([input_spec(name).example(8).double()], small)
        small.eval()
        # Zero every channel the submodel does not hold: the full model then computes
        # exactly the submodel's output (the indices are consistent layer to layer).
        masked = {
            k: torch.zeros_like(v) if v.is_floating_point() else v.clone() for k, v in whole.items()
        }
        for k, i in idx.items():
            if masked[k].dim():
                masked[k][torch.meshgrid(*i, indexing="ij")] = small.state_dict()[k]
        bias = out.replace("weight", "bias")
        masked[bias] = whole[bias]
        for k in masked:
            if k.endswith("running_var"):
                masked[k][masked[k] == 0] = 1.0
        big.load_state_dict(masked)
        with torch.no_grad():
            got, want = big(x), small(x)
        # The two inputs' outputs differ: the comparison is not of two constants.
        assert (want[0] - want[1]).abs().max() > 1e-6
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


def test_a_densenet_layer_takes_the_first_ceil_rk_channels_of_each_block_it_concatenates() -> None:
    cfg = model_config("densenet40")
    full = build_at(cfg, 1.0).state_dict()
    shapes = {k: tuple(v.shape) for k, v in build_at(cfg, 0.25).state_dict().items()}
    # The second dense layer's input: the stem's 16 channels and the first layer's 12.
    assert full["features.2.norm.weight"].shape == (28,)
    idx = indices(full, shapes, width_rule(cfg), Extraction())
    assert idx["features.2.norm.weight"][0].tolist() == [0, 1, 2, 3, 16, 17, 18]
    assert idx["features.2.conv.weight"][1].tolist() == [0, 1, 2, 3, 16, 17, 18]
    rolled = indices(full, shapes, width_rule(cfg), Extraction("rolling", offset=14))
    # Of the stem: 14, 15, 0, 1 (the window wraps); of the 12: 2, 3, 4 (14 mod 12).
    assert rolled["features.2.norm.weight"][0].tolist() == [14, 15, 0, 1, 18, 19, 20]


def test_a_model_without_a_width_rule_is_one_line_naming_the_supported() -> None:
    with pytest.raises(
        FedbenchError, match=r"no width rule.*supported: alexnet, .*lenet, .*small_cnn, vgg16"
    ) as err:
        width_rule(model_config("vit_tiny"))
    assert "\n" not in str(err.value)
