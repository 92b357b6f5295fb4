from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbench.data.source import (
    Tensors,
    check_input_shape,
    image_shape,
    standardise,
    to_input_shape,
)
from fedbench.errors import FedbenchError


def _tensors(n: int, shape: tuple[int, int, int] = (1, 4, 4)) -> Tensors:
    x = torch.arange(n * int(np.prod(shape)), dtype=torch.float32).view(n, *shape)
    return Tensors(x, torch.arange(n, dtype=torch.int64))


def test_tensors_validates_dtypes_and_lengths() -> None:
    with pytest.raises(ValueError, match="float32"):
        Tensors(torch.zeros(2, 1, 4, 4, dtype=torch.float64), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="int64"):
        Tensors(torch.zeros(2, 1, 4, 4), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="2 examples but y has 3"):
        Tensors(torch.zeros(2, 1, 4, 4), torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="N, C, H, W"):
        Tensors(torch.zeros(2, 16), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="2 examples but ids has 1"):
        Tensors(
            torch.zeros(2, 16, dtype=torch.int64),
            torch.zeros(2, dtype=torch.int64),
            torch.zeros(1, dtype=torch.int64),
        )
    tokens = Tensors(
        torch.zeros(3, 16, dtype=torch.int64), torch.zeros(3, dtype=torch.int64), torch.arange(3)
    )
    assert tokens.shape == (16,) and not tokens.is_image
    assert tokens.subset([2, 0]).ids.tolist() == [2, 0]  # owners travel with their examples
    assert Tensors.concat([tokens, tokens], (16,), torch.int64).ids.tolist() == [0, 1, 2] * 2


def test_subset_keeps_order_and_copies() -> None:
    t = _tensors(5)
    sub = t.subset(np.array([4, 0, 2]))
    assert len(sub) == 3 and sub.shape == (1, 4, 4)
    assert sub.y.tolist() == [4, 0, 2]
    assert torch.equal(sub.x[0], t.x[4])
    sub.x.zero_()
    assert t.x.sum() > 0  # the original is untouched
    assert len(t.subset([])) == 0
    assert t.subset(torch.tensor([1])).y.tolist() == [1]


def test_empty_and_concat() -> None:
    empty = Tensors.empty((3, 8, 8))
    assert len(empty) == 0 and empty.shape == (3, 8, 8)
    assert len(Tensors.concat([], (3, 8, 8))) == 0
    both = Tensors.concat([_tensors(2), _tensors(3)], (1, 4, 4))
    assert both.y.tolist() == [0, 1, 0, 1, 2]


def test_grey_to_colour_repeats_and_colour_to_grey_averages() -> None:
    grey = torch.rand(2, 1, 5, 5)
    colour = to_input_shape(grey, (3, 5, 5))
    assert colour.shape == (2, 3, 5, 5)
    for c in range(3):
        assert torch.equal(colour[:, c], grey[:, 0])
    rgb = torch.rand(2, 3, 5, 5)
    assert torch.allclose(to_input_shape(rgb, (1, 5, 5))[:, 0], rgb.mean(dim=1))


def test_resize_is_bilinear_and_keeps_constants() -> None:
    x = torch.full((3, 1, 8, 8), 0.25)
    up = to_input_shape(x, (1, 32, 32))
    assert up.shape == (3, 1, 32, 32)
    assert torch.allclose(up, torch.full_like(up, 0.25))
    ramp = torch.linspace(0, 1, 8).repeat(8, 1).view(1, 1, 8, 8)
    down = to_input_shape(ramp, (1, 4, 4))
    assert down.shape == (1, 1, 4, 4)
    assert bool((down[0, 0, 0].diff() > 0).all())  # the ramp survives shrinking
    assert to_input_shape(torch.zeros(0, 1, 8, 8), (3, 16, 16)).shape == (0, 3, 16, 16)


def test_impossible_channel_conversion_is_a_user_error() -> None:
    with pytest.raises(FedbenchError, match="2-channel"):
        to_input_shape(torch.zeros(1, 2, 4, 4), (3, 4, 4))


def test_standardise_uses_train_statistics_for_all() -> None:
    train = torch.rand(50, 3, 4, 4) * torch.tensor([1.0, 5.0, 10.0]).view(1, 3, 1, 1) + 2
    test = train[:10].clone()
    s_train, s_test = standardise(train, test)
    assert s_train is train and s_test is test  # in place: no second copy of a dataset
    assert torch.allclose(s_train.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5)
    assert torch.allclose(s_train.std(dim=(0, 2, 3)), torch.ones(3), atol=1e-5)
    assert torch.allclose(s_test, s_train[:10])  # same transform, not refitted


def test_check_input_shape() -> None:
    assert check_input_shape([3, 32, 32]) == (3, 32, 32)
    assert check_input_shape([80]) == (80,)  # a token model's sequence length
    with pytest.raises(FedbenchError, match="positive sizes"):
        check_input_shape((0, 32, 32))
    with pytest.raises(FedbenchError, match="data=digits holds images.*text data set"):
        image_shape((80,), "digits")
