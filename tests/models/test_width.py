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
    "name", ["small_cnn", "lenet", "lenet_mnn", "reduced_mobilenet", "alexnet_mnn"]
)
def test_a_submodel_is_a_slice_that_computes_the_same(name: str) -> None:
    cfg = model_config(name)
    torch.manual_seed(0)
    big = build_at(cfg, 1.0).eval()
    small = build_at(cfg, 0.25).eval()
    shapes = {k: tuple(v.shape) for k, v in small.state_dict().items()}
    out = [k for k, v in shapes.items() if len(v) == 2][-1]  # the output layer
    assert shapes[out][0] == big.state_dict()[out].shape[0]  # the classes stay full
    for how in (Extraction("first"), Extraction("rolling", offset=5)):
        idx = indices(big.state_dict(), shapes, width_rule(cfg), how)
        small.load_state_dict(extract(big.state_dict(), idx))
        # Zero every channel the submodel does not hold: the full model then computes
        # exactly the submodel's output (the indices are consistent layer to layer).
        masked = {
            k: torch.zeros_like(v) if v.is_floating_point() else v.clone()
            for k, v in big.state_dict().items()
        }
        for k, i in idx.items():
            if masked[k].dim():
                masked[k][torch.meshgrid(*i, indexing="ij")] = small.state_dict()[k]
        bias = out.replace("weight", "bias")
        masked[bias] = big.state_dict()[bias]
        for k in masked:
            if k.endswith("running_var"):
                masked[k][masked[k] == 0] = 1.0
        big.load_state_dict(masked)
        x = input_spec(name).example(2)
        torch.testing.assert_close(big(x), small(x), rtol=1e-4, atol=1e-5)


def test_a_model_without_a_width_rule_is_one_line_naming_the_supported() -> None:
    with pytest.raises(
        FedbenchError, match=r"no width rule.*supported: alexnet, .*lenet, .*small_cnn, vgg16"
    ) as err:
        width_rule(model_config("vit_tiny"))
    assert "\n" not in str(err.value)
