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


def test_the_file_read_is_sklearns_digits_exactly() -> None:
    from fedbench.data.digits import read_digits

    images, labels = read_digits()
    ref = load_digits()
    assert images.dtype == np.float32 and labels.dtype == np.int64
    assert np.array_equal(images, ref.images) and np.array_equal(labels, ref.target)


def test_loading_digits_does_not_import_scikit_learn() -> None:
    # scikit-learn + SciPy cost every worker ~50 MB resident and a second of start-up.
    import subprocess
    import sys

    code = (
        "import sys; from fedbench.data.digits import DigitsSource; "
        "DigitsSource().load((1, 8, 8)); print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('sklearn', 'scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
