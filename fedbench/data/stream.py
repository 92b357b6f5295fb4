"""The daily data stream: what a device "collects" on each day.

Paper 000 trains on the images a phone gathers each day (64 per day, for 17
days). A device here owns a partition of the device pool, and its days are
drawn from that partition only.

Drawing rule: the partition's n base images are laid out as an endless
sequence of epochs; epoch e is a permutation of the partition seeded by
(seed, partition, e). Day d >= 1 is positions (d-1)*S .. d*S-1 of that
sequence, S = samples_per_day. So the first floor(n/S) days never repeat a
base image (drawing without replacement), and later days cycle through
fresh reshuffles of the partition; an image repeats within one day only
when the day straddles two epochs or S > n. With `augment`, every drawn
image gets its own random augmentation seeded by (seed, partition, d): a
translation of up to 1/16 of the image size (2 px at 32x32), a rotation of
up to 10 degrees and light Gaussian noise (std 0.05 of the standardised
data), so later days are new draws from the same distribution rather than
exact repeats. A day depends only on (seed, partition indices, d), never
on which days were asked for before.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError

# Separate random streams for the order of base images and for augmentations.
_ORDER_STREAM = 0
_AUGMENT_STREAM = 1


@dataclass(frozen=True)
class Augmentation:
    """Per-image random augmentation bounds."""

    max_shift: float = 1 / 16  # fraction of the image height/width
    max_rotation_deg: float = 10.0
    noise_std: float = 0.05  # in units of the standardised pixels (std 1)


def augment_images(x: torch.Tensor, aug: Augmentation, rng: np.random.Generator) -> torch.Tensor:
    """Randomly shift, rotate and add noise to every image of x (N, C, H, W)."""
    n, _, h, w = x.shape
    angle = np.deg2rad(rng.uniform(-aug.max_rotation_deg, aug.max_rotation_deg, n))
    # affine_grid works in [-1, 1] coordinates, where the full size spans 2.
    shift = rng.uniform(-aug.max_shift, aug.max_shift, (n, 2)) * 2.0
    cos, sin = np.cos(angle), np.sin(angle)
    # Rotation in pixel space, expressed in normalised coordinates (aspect-correct).
    theta = np.stack(
        [
            np.stack([cos, -sin * h / w, shift[:, 0]], axis=1),
            np.stack([sin * w / h, cos, shift[:, 1]], axis=1),
        ],
        axis=1,
    )
    grid = F.affine_grid(
        torch.from_numpy(theta).to(torch.float32), [n, x.shape[1], h, w], align_corners=False
    )
    # "border" repeats the edge (background) instead of padding with the mean.
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    noise = rng.standard_normal(tuple(x.shape), dtype=np.float32) * np.float32(aug.noise_std)
    return out + torch.from_numpy(noise)


def _partition_key(indices: np.ndarray) -> int:
    """A stable 64-bit identity of a partition, for seeding."""
    return int.from_bytes(hashlib.blake2b(indices.tobytes(), digest_size=8).digest(), "little")


@dataclass(frozen=True, eq=False)
class DailyStream:
    """A device's days, drawn from `pool` at positions `indices` (its partition)."""

    pool: Tensors
    indices: np.ndarray
    samples_per_day: int
    seed: int
    augment: bool
    augmentation: Augmentation = Augmentation()
    _key: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.samples_per_day < 1:
            raise FedbenchError(f"samples_per_day={self.samples_per_day}: must be >= 1")
        # Sorted so the stream depends on the partition's members, not their order.
        indices = np.sort(np.asarray(self.indices, dtype=np.int64))
        if indices.size == 0:
            raise FedbenchError("a device's partition is empty: it has no data to stream")
        if indices[0] < 0 or indices[-1] >= len(self.pool):
            raise ValueError(f"partition indices outside the pool of {len(self.pool)} examples")
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "_key", _partition_key(indices))

    @property
    def days_in_first_pass(self) -> int:
        """Days drawn entirely without replacement."""
        return self.indices.size // self.samples_per_day

    def _epoch(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, self._key, _ORDER_STREAM, epoch])
        return rng.permutation(self.indices)

    def base_indices(self, d: int) -> np.ndarray:
        """Pool positions of day `d`'s images, before augmentation."""
        _check_day(d)
        n, s = self.indices.size, self.samples_per_day
        start, stop = (d - 1) * s, d * s
        first, last = start // n, math.ceil(stop / n)
        sequence = np.concatenate([self._epoch(e) for e in range(first, last)])
        return sequence[start - first * n : stop - first * n]

    def day(self, d: int) -> Tensors:
        """The `samples_per_day` examples collected on day `d` (d >= 1)."""
        drawn = self.pool.subset(self.base_indices(d))
        # Shifts and rotations mean something for images only (not tokens or spectrograms).
        if not (self.augment and drawn.is_image):
            return drawn
        rng = np.random.default_rng([self.seed, self._key, _AUGMENT_STREAM, d])
        return drawn.with_x(augment_images(drawn.x, self.augmentation, rng))

    def replay(self, d: int, buffer_days: int) -> Tensors:
        """Days max(1, d - buffer_days) .. d - 1 concatenated (empty on day 1)."""
        _check_day(d)
        if buffer_days < 0:
            raise ValueError(f"buffer_days={buffer_days}: must be >= 0")
        days = range(max(1, d - buffer_days), d)
        return Tensors.concat([self.day(k) for k in days], self.pool.shape, self.pool.x.dtype)


def _check_day(d: int) -> None:
    if d < 1:
        raise ValueError(f"day {d}: days are numbered from 1")
