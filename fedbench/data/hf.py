"""`data=hf`: any image or text classification set that Hugging Face `datasets` opens.

`data.name` is a hub id (`flwrlabs/femnist`, read from the HF cache when
offline) or a local path: a `save_to_disk` folder, parquet or csv files, an
imagefolder (images in one folder per class, optionally under train/ and
test/), or a LEAF JSON tree (fedbench.data.hf_open decides which, from file
names only; nothing in the data is ever run). The set's own "test" split is
the official test split; without one, `make_splits` holds one out.

Columns come from `data.source.*_column` or are found by name: images from
an Image feature or a column `image`/`img`, text from `text`/`sentence`,
labels from `label`/`labels`/`character`, owners (`Tensors.ids`, for the
natural_id partitioners) from `writer_id`/`user_id`/`client_id`. Encoding is
fedbench.data.hf_encode's (images standardised like every image source; text
as UTF-8 byte ids).

`name` and `num_classes` are per instance here, not class constants: the
config gives both (hf.yaml passes `${..name}` and `${..num_classes}`), the
model's head is sized from `data.num_classes` before any data is read, and
`load` checks it against the data, naming the right value when it differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
from PIL import Image as PILImage

from fedbench.data.hf_encode import InputKind, Raw, RawSplit, encode, leaf_raw
from fedbench.data.hf_open import Opened, locate, open_located
from fedbench.data.leaf import read_leaf_tree
from fedbench.data.source import DataSource, Tensors
from fedbench.errors import FedbenchError

IMAGE_NAMES = ("image", "img")
TEXT_NAMES = ("text", "sentence")
LABEL_NAMES = ("label", "labels", "character")
OWNER_NAMES = ("writer_id", "user_id", "client_id")
_BATCH = 1024  # images decoded per step: bounds the PIL objects alive at once


@dataclass(frozen=True)
class Columns:
    """Which columns hold the inputs (and of what kind), the labels and the owners."""

    inputs: str
    kind: InputKind
    label: str
    owner: str | None


@dataclass(frozen=True)
class HfSource(DataSource):
    """A classification set opened by `datasets`; see the module docstring."""

    # Per instance (the base class declares them as class constants): see above.
    name: str  # type: ignore[misc]
    num_classes: int  # type: ignore[misc]
    image_column: str | None = None
    text_column: str | None = None
    label_column: str | None = None
    id_column: str | None = None
    cache_dir: str | None = None  # datasets' cache for hub and parquet/csv/image builds

    def __post_init__(self) -> None:
        if self.image_column is not None and self.text_column is not None:
            raise FedbenchError(
                "data.source.image_column and data.source.text_column are both set; give one"
            )

    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        if self.name == "hf":
            raise FedbenchError(
                "data.name='hf': data=hf needs data.name=<hub id or local path>, e.g. "
                "data.name=flwrlabs/femnist data.num_classes=62"
            )
        where = locate(self.name)
        if where.kind == "leaf" and where.path is not None:
            raw = leaf_raw(read_leaf_tree(where.path))
        else:
            raw = self.raw(open_located(where, self.cache_dir), input_shape)
        train, test, count = encode(raw, input_shape, f"data.name={self.name!r}")
        check_classes(self.num_classes, count, raw.class_names is None, self.name)
        return train, test

    def raw(self, opened: Opened, input_shape: tuple[int, ...]) -> Raw:
        """The opened splits' columns, images decoded for the model's channel count."""
        columns = pick_columns(opened.train.features, self)
        mode = "L" if len(input_shape) == 3 and input_shape[0] == 1 else "RGB"
        train = raw_split(opened.train, columns, mode, "train")
        test = RawSplit([], [], None if columns.owner is None else [])
        if opened.test is not None:
            test = raw_split(opened.test, columns, mode, "test")
        label = opened.train.features[columns.label]
        names = tuple(label.names) if isinstance(label, datasets.ClassLabel) else None
        return Raw(columns.kind, train, test, names)


def check_classes(expected: int, found: int, lower_bound: bool, name: str) -> None:
    """`data.num_classes` against the data: ClassLabel and strings exactly, ints as a floor.

    Plain integer labels say only that there are at least max + 1 classes (a
    subset may lack the last ones), so a larger `data.num_classes` is kept.
    """
    if found == expected or (lower_bound and found < expected and found > 0):
        return
    raise FedbenchError(
        f"data.num_classes={expected}: data set {name!r} has {found} classes; "
        f"set data.num_classes={found}"
    )


def pick_columns(features: datasets.Features, source: HfSource) -> Columns:
    """The columns to use: the configured ones (checked) or found by feature and name."""
    present = list(features)

    def given(key: str, value: str | None) -> str | None:
        if value is not None and value not in present:
            raise FedbenchError(
                f"data.source.{key}={value!r}: no such column in {source.name!r} "
                f"(columns: {', '.join(present)})"
            )
        return value

    def first(names: tuple[str, ...]) -> str | None:
        return next((c for c in names if c in present), None)

    image = given("image_column", source.image_column)
    text = given("text_column", source.text_column)
    if image is None and text is None:
        image = next((c for c in present if isinstance(features[c], datasets.Image)), None)
        image = image or first(IMAGE_NAMES)
        text = None if image else first(TEXT_NAMES)
    label = given("label_column", source.label_column) or first(LABEL_NAMES)
    owner = given("id_column", source.id_column) or first(OWNER_NAMES)
    if label is None or (image is None and text is None):
        what = "label" if label is None else "image or text"
        key = "label_column" if label is None else "image_column or data.source.text_column"
        raise FedbenchError(
            f"data.name={source.name!r}: no {what} column found (columns: "
            f"{', '.join(present)}); name it with data.source.{key}"
        )
    if image is not None:
        return Columns(image, "image", label, owner)
    return Columns(str(text), "text", label, owner)


def raw_split(ds: datasets.Dataset, columns: Columns, mode: str, split: str) -> RawSplit:
    """One split's columns as Python values (images as uint8 arrays in `mode`)."""
    wanted = [c for c in (columns.inputs, columns.label, columns.owner) if c is not None]
    missing = [c for c in wanted if c not in ds.features]
    if missing:
        raise FedbenchError(
            f"the {split} split lacks the column(s) {', '.join(missing)} "
            f"(columns: {', '.join(ds.features)})"
        )
    if columns.kind == "image":
        inputs: list[Any] = _decoded_images(ds, columns.inputs, mode)
    else:
        inputs = _column(ds, columns.inputs)
        if not all(isinstance(t, str) for t in inputs):
            raise FedbenchError(
                f"data.source.text_column={columns.inputs!r}: holds "
                f"{ds.features[columns.inputs]}, not strings"
            )
    owners = None if columns.owner is None else _column(ds, columns.owner)
    return RawSplit(inputs, _column(ds, columns.label), owners)


def _column(ds: datasets.Dataset, name: str) -> list[Any]:
    """A column's plain values, straight from Arrow (nothing decoded)."""
    return list(ds.with_format("arrow")[name].to_pylist())


def _decoded_images(ds: datasets.Dataset, column: str, mode: str) -> list[Any]:
    """Each image decoded by `datasets`' Image feature (PIL), as a uint8 array in `mode`."""
    if not isinstance(ds.features[column], datasets.Image):
        try:
            ds = ds.cast_column(column, datasets.Image())
        except (TypeError, ValueError) as e:
            raise FedbenchError(
                f"data.source.image_column={column!r}: {ds.features[column]} is not images ({e})"
            ) from None
    out: list[Any] = []
    for batch in ds.select_columns([column]).iter(batch_size=_BATCH):
        for image in batch[column]:
            if not isinstance(image, PILImage.Image):
                raise FedbenchError(f"data.source.image_column={column!r}: a row holds no image")
            out.append(np.asarray(image.convert(mode)))
    return out
