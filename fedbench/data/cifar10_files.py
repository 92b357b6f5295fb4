"""Small CIFAR-10 look-alikes in exactly the official file format.

Tests (and anyone trying the CIFAR-10 path offline) get the real layout:
`cifar-10-batches-py/data_batch_1..5`, `test_batch` and `batches.meta`,
protocol-2 pickles of dicts with bytes keys, b"data" uint8 N x 3072 stored
channel-major. Each class has its own mean colour, so a model can learn them.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from fedbench.data.cifar10 import FOLDER, NUM_CLASSES, TEST_FILE, TRAIN_FILES

LABEL_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


def _batch(
    label: str, n: int, colours: np.ndarray, rng: np.random.Generator
) -> dict[bytes, object]:
    # Every class appears when n >= 10, so stratified splits work on small files.
    labels = rng.permutation(np.arange(n) % NUM_CLASSES)
    base = np.repeat(colours[labels][:, None], 3 * 1024, axis=1)
    base[:, :1024] = 255 - base[:, :1024]  # channels differ, so grey conversion matters
    noisy = base + rng.normal(0.0, 20.0, size=base.shape)
    data = np.clip(noisy, 0, 255).astype(np.uint8)
    return {
        b"batch_label": label.encode(),
        b"labels": [int(v) for v in labels],
        b"data": data,
        b"filenames": [f"synthetic_{i:05d}.png".encode() for i in range(n)],
    }


def write_cifar10_like(root: str | Path, n_train_per_batch: int, n_test: int, seed: int) -> Path:
    """Write the six batches and batches.meta under `root`; return the batch folder."""
    folder = Path(root) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colours = np.linspace(30, 225, NUM_CLASSES)[rng.permutation(NUM_CLASSES)]
    batches = [
        (name, _batch(f"training batch {i} of 5", n_train_per_batch, colours, rng))
        for i, name in enumerate(TRAIN_FILES, start=1)
    ]
    batches.append((TEST_FILE, _batch("testing batch 1 of 1", n_test, colours, rng)))
    for name, batch in batches:
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    meta = {
        b"num_cases_per_batch": n_train_per_batch,
        b"label_names": [n.encode() for n in LABEL_NAMES],
        b"num_vis": 3 * 1024,
    }
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump(meta, f, protocol=2)
    return folder
