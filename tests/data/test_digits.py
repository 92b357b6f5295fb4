from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits

from fedbench.data.digits import DigitsSource


def test_loads_all_real_digits_standardised() -> None:
    train, test = DigitsSource().load((1, 8, 8))
    ref = load_digits()
    assert len(train) == 1797 and train.shape == (1, 8, 8)
    assert len(test) == 0 and test.shape == (1, 8, 8)
    assert train.y.tolist() == ref.target.tolist()
    assert abs(train.x.mean().item()) < 1e-5
    assert abs(train.x.std().item() - 1.0) < 1e-5
    # Standardising is affine: undoing it must give back sklearn's pixels.
    raw = torch.from_numpy(ref.images.astype(np.float32) / 16.0).unsqueeze(1)
    scale = raw.std() / train.x.std()
    assert torch.allclose(train.x * scale + raw.mean(), raw, atol=1e-5)


def test_converts_to_colour_and_larger_size() -> None:
    train, test = DigitsSource().load((3, 32, 32))
    assert train.x.shape == (1797, 3, 32, 32)
    assert test.x.shape == (0, 3, 32, 32)
    assert torch.equal(train.x[:, 0], train.x[:, 2])
    assert abs(train.x.mean().item()) < 1e-4 and abs(train.x.std().item() - 1) < 1e-4


def test_sources_are_values() -> None:
    # make_splits caches by source: two configs building it must hit the same entry.
    assert DigitsSource() == DigitsSource()
    assert hash(DigitsSource()) == hash(DigitsSource())
    assert DigitsSource.name == "digits" and DigitsSource.num_classes == 10
