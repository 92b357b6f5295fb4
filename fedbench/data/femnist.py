"""FEMNIST (LEAF): handwritten digits and letters, 62 classes, 28x28 grey, by writer.

Two layouts under `root` (default `$FEDBENCH_DATA/femnist`):

- "leaf": LEAF's JSON tree, `root/train/*.json` and `root/test/*.json`, x
  784 floats in [0, 1] per image, y the class 0..61, users the writers. Made
  in TalwalkarLab/leaf's data/femnist with
  `./preprocess.sh -s niid --sf 0.05 -k 0 -t sample` (5% of the writers,
  each writer's samples split into train and test).
- "hf": `flwrlabs/femnist` saved with
  `datasets.load_dataset("flwrlabs/femnist").save_to_disk(root)` (or its
  parquet files): columns `image` (PIL 28x28), `writer_id`, `character`
  (0..61) and `hsf_id`; one train split, so `make_splits` holds out a test.

"auto" picks "leaf" when `root/train/*.json` exists, else "hf". Each
example's writer comes back as `Tensors.ids` (its index among the sorted
writer names, the same in train and test), for `partition.scheme=natural_id`.
Reading and encoding are `data=hf`'s (fedbench.data.leaf, hf_open, hf_encode).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from fedbench.data.hf import HfSource
from fedbench.data.hf_encode import Raw, encode, leaf_raw
from fedbench.data.hf_open import locate, open_located
from fedbench.data.leaf import is_leaf_tree, read_leaf_tree
from fedbench.data.source import DataSource, Tensors, data_root, image_shape
from fedbench.errors import FedbenchError

NUM_CLASSES = 62
SIDE = 28
HUB_ID = "flwrlabs/femnist"


@dataclass(frozen=True)
class FemnistSource(DataSource):
    """FEMNIST from a LEAF tree or a saved `flwrlabs/femnist`; ids are writers."""

    root: str
    layout: Literal["auto", "leaf", "hf"] = "auto"

    name: ClassVar[str] = "femnist"
    num_classes: ClassVar[int] = NUM_CLASSES

    @property
    def root_path(self) -> Path:
        return data_root(self.root)

    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        shape = image_shape(input_shape, self.name)
        raw = self.raw(shape)
        _check_images(raw, self.root_path)
        train, test, count = encode(raw, shape, "data=femnist")
        if count > NUM_CLASSES:
            raise FedbenchError(
                f"data.source.root={self.root!r}: labels reach {count - 1}; FEMNIST has "
                f"{NUM_CLASSES} classes 0..{NUM_CLASSES - 1} - is this another data set?"
            )
        return train, test

    def raw(self, shape: tuple[int, int, int]) -> Raw:
        """The files at `root` in the chosen layout, before encoding."""
        root = self.root_path
        if not root.exists():
            raise self._not_found()
        if self.layout == "leaf" or (self.layout == "auto" and is_leaf_tree(root)):
            return leaf_raw(read_leaf_tree(root))
        where = locate(str(root), "data.source.root")
        if where.kind == "leaf":
            raise FedbenchError(
                f"data.source.layout={self.layout!r}: {root} holds LEAF's JSON files, not a "
                "saved flwrlabs/femnist (valid: auto, leaf)"
            )
        columns = HfSource(str(root), NUM_CLASSES, "image", None, "character", "writer_id")
        return columns.raw(open_located(where), shape)

    def _not_found(self) -> FedbenchError:
        root = self.root_path
        return FedbenchError(
            f"FEMNIST not found: data.source.root={self.root!r} resolves to {root}, which "
            "must hold LEAF's train/*.json and test/*.json (TalwalkarLab/leaf data/femnist: "
            "`./preprocess.sh -s niid --sf 0.05 -k 0 -t sample`, then copy data/train and "
            'data/test there) or a save_to_disk folder (`python -c "import datasets; '
            f"datasets.load_dataset('{HUB_ID}').save_to_disk('{root}')\"`); "
            "FEDBENCH_DATA sets another root"
        )


def _check_images(raw: Raw, root: Path) -> None:
    """FEMNIST's images are 28x28 grey; anything else is another data set."""
    for split in (raw.train, raw.test):
        odd = next((a.shape for a in split.inputs if tuple(a.shape[:2]) != (SIDE, SIDE)), None)
        if raw.kind != "image" or odd is not None:
            raise FedbenchError(
                f"data.source.root={str(root)!r}: FEMNIST images are {SIDE}x{SIDE}, found "
                f"{odd if raw.kind == 'image' else 'text'} - is this another data set?"
            )
