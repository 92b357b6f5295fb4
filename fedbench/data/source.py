"""Data sources: where images come from and how they reach a model's input shape.

A `DataSource` loads one dataset as two `Tensors`: the train pool and the
official test split (empty when the dataset has none; `splits.make_splits`
then holds one out). Images come back already converted to the model's input
shape (channels 1<->3, bilinear resize) and standardised per channel with the
train pool's statistics, so every consumer sees the same tensors.

Sources are frozen dataclasses built from Hydra config with `_target_`; being
hashable by value lets `make_splits` cache per process across the many
simulated clients that build their own source object from the same config.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
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
    """A labelled set of images: x float32 (N, C, H, W), y int64 (N,).

    The tensors are shared with caches (`make_splits`); treat them as read-only.
    """

    x: torch.Tensor
    y: torch.Tensor

    def __post_init__(self) -> None:
        # Shape mistakes here surface much later as obscure training errors.
        if self.x.dim() != 4 or self.x.dtype != torch.float32:
            raise ValueError(
                f"x must be float32 (N, C, H, W), got {self.x.dtype} {tuple(self.x.shape)}"
            )
        if self.y.dim() != 1 or self.y.dtype != torch.int64:
            raise ValueError(f"y must be int64 (N,), got {self.y.dtype} {tuple(self.y.shape)}")
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"x has {self.x.shape[0]} images but y has {self.y.shape[0]} labels")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """The shape of one image, (C, H, W)."""
        c, h, w = self.x.shape[1:]
        return (int(c), int(h), int(w))

    def subset(self, idx: Index) -> Tensors:
        """The examples at positions `idx` (a copy, in the order given)."""
        index = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        return Tensors(self.x.index_select(0, index), self.y.index_select(0, index))

    @staticmethod
    def empty(shape: tuple[int, int, int]) -> Tensors:
        """No examples, with images of `shape` so they still concatenate."""
        return Tensors(
            torch.empty((0, *shape), dtype=torch.float32), torch.empty(0, dtype=torch.int64)
        )

    @staticmethod
    def concat(parts: Sequence[Tensors], shape: tuple[int, int, int]) -> Tensors:
        """All `parts` one after another; `shape` is used when there are none."""
        if not parts:
            return Tensors.empty(shape)
        return Tensors(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]))


class DataSource(ABC):
    """One dataset. Subclasses set `name` and `num_classes` and implement `load`."""

    name: ClassVar[str]
    num_classes: ClassVar[int]

    @abstractmethod
    def load(self, input_shape: tuple[int, int, int]) -> tuple[Tensors, Tensors]:
        """(train_pool, official_test) at `input_shape` = (C, H, W), standardised."""


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


def check_input_shape(input_shape: Sequence[int]) -> tuple[int, int, int]:
    """`input_shape` as a (C, H, W) tuple of positive ints, or a FedbenchError."""
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise FedbenchError(
            f"model input shape {tuple(input_shape)}: expected (channels, height, width), all >= 1"
        )
    return (shape[0], shape[1], shape[2])
