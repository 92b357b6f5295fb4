"""scikit-learn's handwritten digits: 1,797 real 8x8 grey images, 10 classes.

The set ships inside scikit-learn, so it needs no network and loads in
milliseconds: the default dataset for tests and laptop runs. It has no
official test split; `make_splits` holds out a seeded, stratified one.

It is read from scikit-learn's own file (the one `load_digits` parses), not
through `sklearn.datasets`: importing scikit-learn and SciPy costs every
process that loads the data (the server and each simulation worker) about a
second and 50 MB of resident memory, for a 1,797-line CSV file.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from fedbench.data.source import DataSource, Tensors, image_shape, standardise, to_input_shape

# Pixel values in load_digits are counts of set pixels in a 4x4 block: 0..16.
_MAX_PIXEL = 16.0


def digits_file() -> Path:
    """scikit-learn's digits.csv.gz: one row per image, 64 pixels then the label."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("data=digits needs scikit-learn installed (its digits file)")
    return Path(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 images (n, 8, 8) as float32 counts 0..16, and their labels (int64)."""
    table = np.loadtxt(digits_file(), delimiter=",", dtype=np.float32)
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


@dataclass(frozen=True)
class DigitsSource(DataSource):
    """All 1,797 digits as the train pool; the official test split is empty."""

    name: ClassVar[str] = "digits"
    num_classes: ClassVar[int] = 10

    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        shape = image_shape(input_shape, self.name)
        images, labels = read_digits()
        x = to_input_shape(torch.from_numpy(images / _MAX_PIXEL).unsqueeze(1), shape)
        (x,) = standardise(x)
        y = torch.from_numpy(labels)
        return Tensors(x, y), Tensors.empty(shape)
