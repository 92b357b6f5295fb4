"""scikit-learn's handwritten digits: 1,797 real 8x8 grey images, 10 classes.

The set ships inside scikit-learn, so it needs no network and loads in
milliseconds: the default dataset for tests and laptop runs. It has no
official test split; `make_splits` holds out a seeded, stratified one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from sklearn.datasets import load_digits

from fedbench.data.source import DataSource, Tensors, standardise, to_input_shape

# Pixel values in load_digits are counts of set pixels in a 4x4 block: 0..16.
_MAX_PIXEL = 16.0


@dataclass(frozen=True)
class DigitsSource(DataSource):
    """All 1,797 digits as the train pool; the official test split is empty."""

    name: ClassVar[str] = "digits"
    num_classes: ClassVar[int] = 10

    def load(self, input_shape: tuple[int, int, int]) -> tuple[Tensors, Tensors]:
        bunch = load_digits()
        images = np.asarray(bunch.images, dtype=np.float32) / _MAX_PIXEL
        x = to_input_shape(torch.from_numpy(images).unsqueeze(1), input_shape)
        (x,) = standardise(x)
        y = torch.from_numpy(np.asarray(bunch.target, dtype=np.int64))
        return Tensors(x, y), Tensors.empty(input_shape)
