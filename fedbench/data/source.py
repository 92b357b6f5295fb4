"""Data sources: where examples come from and how they reach a model's input shape.

A `DataSource` loads one dataset as two `Tensors`: the train pool and the
official test split (empty when the dataset has none; `splits.make_splits`
then holds one out). Images come back already converted to the model's input
shape (channels 1<->3, bilinear resize) and standardised per channel with the
train pool's statistics, so every consumer sees the same tensors. Text comes
back as int64 token ids (N, T); audio as float32 log-mel features (N, 1, mels,
frames), which the models treat as one-channel images.

A source whose data has natural owners (FEMNIST's writers, Shakespeare's
roles, Speech Commands' speakers) also returns each example's owner as
`Tensors.ids`, so the `natural_id` partitioners can give one owner to one
device.

Sources are frozen dataclasses built from Hydra config with `_target_`; being
hashable by value lets `make_splits` cache per process across the many
simulated clients that build their own source object from the same config.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from fedbench.errors import FedbenchError

Index = np.ndarray | torch.Tensor | Sequence[int]

# Bounds the float32 temporaries of a resize (e.g. 50,000 CIFAR images upsampled).
_CHUNK = 2048


@dataclass(frozen=True)
class Tensors:
    """A labelled set of examples, x (N, ...) and y int64 (N,).

    x is float32 images or features (N, C, H, W) or int64 token ids (N, T).
    `ids`, when the data has natural owners, is each example's owner as an
    int64 (N,) (a writer, role or speaker index); None otherwise.
    The tensors are shared with caches (`make_splits`); treat them as read-only.
    """

    x: torch.Tensor
    y: torch.Tensor
    ids: torch.Tensor | None = None

    def __post_init__(self) -> None:
        # Shape mistakes here surface much later as obscure training errors.
        floats = self.x.dtype == torch.float32 and self.x.dim() == 4
        tokens = self.x.dtype == torch.int64 and self.x.dim() == 2
        if not (floats or tokens):
            raise ValueError(
                "x must be float32 (N, C, H, W) or int64 token ids (N, T), "
                f"got {self.x.dtype} {tuple(self.x.shape)}"
            )
        for key, column in (("y", self.y), ("ids", self.ids)):
            if column is None:
                continue
            if column.dim() != 1 or column.dtype != torch.int64:
                raise ValueError(
                    f"{key} must be int64 (N,), got {column.dtype} {tuple(column.shape)}"
                )
            if column.shape[0] != self.x.shape[0]:
                raise ValueError(
                    f"x has {self.x.shape[0]} examples but {key} has {column.shape[0]}"
                )

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one example: (C, H, W) for images, (T,) for token ids."""
        return tuple(int(d) for d in self.x.shape[1:])

    @property
    def is_image(self) -> bool:
        """Float (N, C, H, W): what `stream.augment_images` can shift and rotate."""
        return self.x.dtype == torch.float32

    def subset(self, idx: Index) -> Tensors:
        """The examples at positions `idx` (a copy, in the order given)."""
        index = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        ids = None if self.ids is None else self.ids.index_select(0, index)
        return Tensors(self.x.index_select(0, index), self.y.index_select(0, index), ids)

    def with_x(self, x: torch.Tensor) -> Tensors:
        """The same examples (labels, owners) with new inputs `x`, e.g. augmented."""
        return Tensors(x, self.y, self.ids)

    @staticmethod
    def empty(shape: Sequence[int], dtype: torch.dtype = torch.float32) -> Tensors:
        """No examples, each of `shape` and `dtype`, so they still concatenate."""
        return Tensors(torch.empty((0, *shape), dtype=dtype), torch.empty(0, dtype=torch.int64))

    @staticmethod
    def concat(
        parts: Sequence[Tensors], shape: Sequence[int], dtype: torch.dtype = torch.float32
    ) -> Tensors:
        """All `parts` one after another; `shape` and `dtype` are used when there are none."""
        if not parts:
            return Tensors.empty(shape, dtype)
        ids = None
        if all(p.ids is not None for p in parts):
            ids = torch.cat([p.ids for p in parts if p.ids is not None])
        return Tensors(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]), ids)


class DataSource(ABC):
    """One dataset. Subclasses set `name` and `num_classes` and implement `load`."""

    name: ClassVar[str]
    num_classes: ClassVar[int]

    @abstractmethod
    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        """(train_pool, official_test) at `input_shape`, standardised.

        `input_shape` is the model's one example: (C, H, W) for images and
        log-mel features, (T,) for token sequences. A source that cannot give
        that shape raises a FedbenchError naming both.
        """


def data_root(root: str) -> Path:
    """A source's `root` setting as an absolute folder (`~` expanded), for its messages too."""
    return Path(os.path.expanduser(root)).absolute()


def to_input_shape(x: torch.Tensor, input_shape: tuple[int, int, int]) -> torch.Tensor:
    """Convert float images (N, C, H, W) to `input_shape`: channels, then size.

    Grey -> colour repeats the channel and colour -> grey averages them, which
    keeps the pixel scale; other channel counts have no meaningful conversion.
    """
    c_out, h_out, w_out = input_shape
    c_in, h_in, w_in = x.shape[1:]
    if c_in != c_out:
        if c_in == 1:
            x = x.expand(-1, c_out, -1, -1)
        elif c_out == 1:
            x = x.mean(dim=1, keepdim=True)
        else:
            raise FedbenchError(
                f"model input shape {tuple(input_shape)}: cannot convert {c_in}-channel images "
                f"to {c_out} channels (valid: equal counts, 1 <-> any)"
            )
    if (h_in, w_in) != (h_out, w_out):
        # Antialias only when shrinking: it is a low-pass filter against aliasing.
        shrink = h_out < h_in or w_out < w_in
        parts = [
            F.interpolate(
                x[i : i + _CHUNK],
                size=(h_out, w_out),
                mode="bilinear",
                align_corners=False,
                antialias=shrink,
            )
            for i in range(0, x.shape[0], _CHUNK)
        ]
        x = torch.cat(parts) if parts else x.new_empty((0, x.shape[1], h_out, w_out))
    return x.contiguous()


def standardise(train: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """Per-channel mean 0 / std 1 using `train`'s statistics, applied to all, IN PLACE.

    Statistics come from the train images only so the test split does not
    leak into the preprocessing. In place because a copy of CIFAR-10's train
    set is 600 MB in every client process; pass tensors you own.
    """
    mean = train.mean(dim=(0, 2, 3), keepdim=True)
    std = train.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-8)
    return [t.sub_(mean).div_(std) for t in (train, *others)]


def check_input_shape(input_shape: Sequence[int]) -> tuple[int, ...]:
    """`input_shape` as a tuple of positive ints, or a FedbenchError."""
    shape = tuple(int(s) for s in input_shape)
    if not shape or min(shape) < 1:
        raise FedbenchError(
            f"model input shape {tuple(input_shape)}: expected positive sizes, "
            "(channels, height, width) or (sequence length,)"
        )
    return shape


def image_shape(input_shape: Sequence[int], data: str) -> tuple[int, int, int]:
    """`input_shape` as (C, H, W) for an image source named `data`, or a FedbenchError."""
    shape = check_input_shape(input_shape)
    if len(shape) != 3:
        raise FedbenchError(
            f"model input shape {shape}: data={data} holds images, which need a model taking "
            "(channels, height, width); a token model (input_shape [T]) needs a text data set"
        )
    return (shape[0], shape[1], shape[2])
