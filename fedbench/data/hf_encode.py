"""Raw columns -> `Tensors`: labels, owners, images and text, for `data=hf` and FEMNIST.

Both the `datasets` path (fedbench.data.hf) and the LEAF path
(fedbench.data.leaf) end in a `Raw` pair of splits, encoded here the same way:

- labels: a ClassLabel's ints as they are; other ints as they are (the class
  count is the largest + 1); strings as their index among the sorted unique
  strings of train and test together, so both splits agree.
- owners (`Tensors.ids`): the index of each example's owner among the sorted
  unique owners of both splits, so a writer has one id in train and test.
- images: uint8 (0..255) or float (0..1) arrays, H x W (grey) or H x W x C,
  to float in [0, 1], then `to_input_shape` and `standardise` with the train
  statistics, like every image source.
- text: UTF-8 bytes, each byte b as id b + 1 (0 is padding), cut or padded
  at the end to the model's T. Bytes, not a character alphabet drawn from
  the data: the ids then mean the same for every data set and split, and a
  model needs a fixed vocabulary of `TEXT_VOCAB` = 257 ids.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from fedbench.data.leaf import LeafSplit, LeafTree
from fedbench.data.source import (
    Tensors,
    check_input_shape,
    image_shape,
    standardise,
    to_input_shape,
)
from fedbench.errors import FedbenchError

PAD = 0
TEXT_VOCAB = 257  # PAD + 256 byte values

InputKind = Literal["image", "text"]


@dataclass(frozen=True)
class RawSplit:
    """One split before encoding: per-example inputs, labels and owners (or None)."""

    inputs: Sequence[Any]
    labels: Sequence[Any]
    owners: Sequence[Any] | None


@dataclass(frozen=True)
class Raw:
    """Both splits of a data set, what its inputs are, and its class names if it has them."""

    kind: InputKind
    train: RawSplit
    test: RawSplit
    class_names: tuple[str, ...] | None = None


def encode(raw: Raw, input_shape: tuple[int, ...], where: str) -> tuple[Tensors, Tensors, int]:
    """(train, test, num_classes): the encoded splits and the data's class count.

    `where` names the data set in errors ("data.name='x'"), together with the
    model input shape that does not fit it.
    """
    try:
        y_train, y_test, num_classes = label_ids(raw.train.labels, raw.test.labels, raw.class_names)
    except FedbenchError as e:
        raise FedbenchError(f"{where}: {e}") from None
    ids_train, ids_test = owner_ids(raw.train.owners, raw.test.owners)
    if raw.kind == "image":
        shape = image_shape(input_shape, where)
        x_train, x_test = images(raw.train.inputs, shape), images(raw.test.inputs, shape)
        standardise(x_train, x_test)
    else:
        length = text_length(input_shape, where)
        x_train, x_test = tokens(raw.train.inputs, length), tokens(raw.test.inputs, length)
    return (
        Tensors(x_train, torch.from_numpy(y_train), ids_train),
        Tensors(x_test, torch.from_numpy(y_test), ids_test),
        num_classes,
    )


def label_ids(
    train: Sequence[Any], test: Sequence[Any], class_names: Sequence[str] | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Both splits' labels as int64 class ids, and the number of classes."""
    values = [*train, *test]
    if all(isinstance(v, str) for v in values) and class_names is None:
        names = sorted(set(values))
        index = {name: i for i, name in enumerate(names)}
        ids = np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))
        count = len(names)
    elif all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        ids = np.asarray(values, dtype=np.int64)
        count = len(class_names) if class_names is not None else int(ids.max(initial=-1)) + 1
        if ids.size and (ids.min() < 0 or ids.max() >= count):
            raise FedbenchError(
                f"labels run from {ids.min()} to {ids.max()}, outside the {count} classes "
                f"0..{count - 1} (a negative label often marks an unlabelled test split)"
            )
    else:
        kinds = sorted({type(v).__name__ for v in values})
        raise FedbenchError(f"labels must be class ids or strings, got {', '.join(kinds)}")
    return ids[: len(train)], ids[len(train) :], count


def owner_ids(
    train: Sequence[Any] | None, test: Sequence[Any] | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Each example's owner as its index among the sorted unique owners of both splits."""
    if train is None or test is None:
        return None, None
    values = [*train, *test]
    if not all(isinstance(v, int | np.integer) for v in values):
        values = [str(v) for v in values]
    _, inverse = np.unique(np.asarray(values), return_inverse=True)
    ids = torch.from_numpy(inverse.astype(np.int64).reshape(-1))
    return ids[: len(train)].clone(), ids[len(train) :].clone()


def images(arrays: Sequence[np.ndarray], shape: tuple[int, int, int]) -> torch.Tensor:
    """Images (H x W or H x W x C; uint8 0..255 or float 0..1) as float (N, C, H, W) at `shape`.

    Images of one size are stacked and resized together (`to_input_shape`
    works in chunks); mixed sizes, as in a folder of photos, one by one.
    """
    if not arrays:
        return torch.empty((0, *shape), dtype=torch.float32)
    sizes = {a.shape for a in arrays}
    if len(sizes) == 1:
        return to_input_shape(_as_float(np.stack(arrays)), shape)
    return torch.cat([to_input_shape(_as_float(a[None]), shape) for a in arrays])


def _as_float(batch: np.ndarray) -> torch.Tensor:
    """(N, H, W[, C]) uint8 or float -> float32 (N, C, H, W) in [0, 1]."""
    x = torch.from_numpy(np.require(batch, requirements=["C", "W"]))
    x = x.unsqueeze(-1) if x.dim() == 3 else x
    x = x.permute(0, 3, 1, 2)
    if x.dtype == torch.uint8:
        return x.to(torch.float32).div_(255.0)
    return x.to(torch.float32)


def text_length(input_shape: tuple[int, ...], where: str) -> int:
    """The model's sequence length T, or a FedbenchError for a model taking images."""
    shape = check_input_shape(input_shape)
    if len(shape) != 1:
        raise FedbenchError(
            f"model input shape {shape}: {where} holds text, which needs a token model "
            f"(input_shape [T], input_dtype int64, a vocabulary of at least {TEXT_VOCAB} ids)"
        )
    return shape[0]


def tokens(texts: Sequence[str], length: int) -> torch.Tensor:
    """UTF-8 byte ids (byte + 1; 0 pads), cut or padded at the end to `length`."""
    out = np.full((len(texts), length), PAD, dtype=np.int64)
    for i, text in enumerate(texts):
        ids = np.frombuffer(str(text).encode("utf-8")[:length], dtype=np.uint8)
        out[i, : ids.size] = ids.astype(np.int64) + 1
    return torch.from_numpy(out)


def leaf_raw(tree: LeafTree) -> Raw:
    """A LEAF tree as `Raw`: string x is text; a list of n*n numbers, an n x n grey image.

    Numbers above 1 are taken as 0..255 pixels, others as LEAF's 0..1 floats.
    """
    first = tree.train.x[0] if len(tree.train) else None
    if isinstance(first, str):
        return Raw("text", _leaf_split(tree.train, list), _leaf_split(tree.test, list))
    if isinstance(first, list) and first and math.isqrt(len(first)) ** 2 == len(first):
        return Raw("image", _leaf_images(tree.train), _leaf_images(tree.test))
    what = f"a list of {len(first)} values" if isinstance(first, list) else type(first).__name__
    raise FedbenchError(
        f"LEAF data at {tree.root}: x is {what}; valid: strings (text) or lists of n*n "
        "numbers (square grey images)"
    )


def _leaf_split(split: LeafSplit, inputs: Any) -> RawSplit:
    return RawSplit(inputs(split.x), split.y, split.users)


def _leaf_images(split: LeafSplit) -> RawSplit:
    """LEAF's flat pixel lists as n x n float arrays in [0, 1]."""
    if not len(split):
        return RawSplit([], [], [])
    try:
        flat = np.asarray(split.x, dtype=np.float32)
    except ValueError as e:
        raise FedbenchError(f"LEAF images are not all the same size: {e}") from None
    side = math.isqrt(flat.shape[1]) if flat.ndim == 2 else 0
    if flat.ndim != 2 or side * side != flat.shape[1]:
        raise FedbenchError(f"LEAF images: expected n*n pixels each, got shape {flat.shape}")
    if flat.size and flat.max() > 1.0:
        flat /= 255.0
    return RawSplit(list(flat.reshape(-1, side, side)), split.y, split.users)
