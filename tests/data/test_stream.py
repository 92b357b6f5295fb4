from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedbench.data.source import Tensors
from fedbench.data.stream import Augmentation, DailyStream, augment_images
from fedbench.errors import FedbenchError

POOL_SIZE = 500


@pytest.fixture(scope="module")
def pool() -> Tensors:
    gen = torch.Generator().manual_seed(0)
    return Tensors(torch.randn(POOL_SIZE, 1, 16, 16, generator=gen), torch.arange(POOL_SIZE) % 10)


PART = np.arange(100, 200)  # a device's partition: 100 images


def _stream(pool: Tensors, s: int = 25, augment: bool = False, seed: int = 0) -> DailyStream:
    return DailyStream(pool, PART, samples_per_day=s, seed=seed, augment=augment)


@pytest.mark.parametrize("augment", [False, True])
def test_sizes(pool: Tensors, augment: bool) -> None:
    stream = _stream(pool, 64, augment)  # paper 000: 64 images a day for 17 days
    for d in (1, 2, 17):
        day = stream.day(d)
        assert len(day) == 64 and day.shape == (1, 16, 16)
    assert len(stream.replay(17, 5)) == 5 * 64
    assert len(stream.replay(3, 5)) == 2 * 64
    assert len(stream.replay(1, 5)) == 0 and stream.replay(1, 5).shape == (1, 16, 16)
    assert len(stream.replay(9, 0)) == 0


@pytest.mark.parametrize("augment", [False, True])
def test_deterministic_and_independent_of_call_order(pool: Tensors, augment: bool) -> None:
    first = _stream(pool, augment=augment)
    fresh_day_7 = first.day(7)
    other = _stream(pool, augment=augment)
    for d in (3, 1, 9):
        other.day(d)
    again = other.day(7)
    assert torch.equal(fresh_day_7.x, again.x) and torch.equal(fresh_day_7.y, again.y)
    shuffled = DailyStream(pool, PART[::-1].copy(), 25, 0, augment)
    assert torch.equal(shuffled.day(7).x, fresh_day_7.x)  # the set matters, not its order


def test_seed_and_partition_change_the_stream(pool: Tensors) -> None:
    base = _stream(pool).base_indices(1)
    assert not np.array_equal(_stream(pool, seed=1).base_indices(1), base)
    other = DailyStream(pool, np.arange(200, 300), 25, 0, False).base_indices(1)
    assert np.intersect1d(other, PART).size == 0


@pytest.mark.parametrize("augment", [False, True])
def test_different_days_differ(pool: Tensors, augment: bool) -> None:
    stream = _stream(pool, augment=augment)
    days = [stream.day(d).x for d in range(1, 9)]
    for i in range(len(days)):
        for j in range(i + 1, len(days)):
            assert not torch.equal(days[i], days[j])


def test_first_pass_draws_without_replacement(pool: Tensors) -> None:
    stream = _stream(pool, s=30)
    assert stream.days_in_first_pass == 3
    drawn = np.concatenate([stream.base_indices(d) for d in (1, 2, 3)])
    assert drawn.size == np.unique(drawn).size == 90
    assert np.isin(drawn, PART).all()


def test_later_days_cycle_through_fresh_epochs(pool: Tensors) -> None:
    stream = _stream(pool, s=25)  # 4 days per epoch of 100
    epochs = [
        np.concatenate([stream.base_indices(d) for d in range(4 * e + 1, 4 * e + 5)])
        for e in range(3)
    ]
    for epoch in epochs:
        assert np.array_equal(np.sort(epoch), PART)  # each epoch uses every image once
    assert not np.array_equal(epochs[0], epochs[1])  # reshuffled, not replayed


def test_day_straddling_epochs_and_days_larger_than_partition(pool: Tensors) -> None:
    straddle = _stream(pool, s=30).base_indices(4)  # positions 90..119: two epochs
    assert straddle.size == 30 and np.isin(straddle, PART).all()
    big = _stream(pool, s=250).base_indices(2)
    assert big.size == 250 and np.isin(big, PART).all()
    assert np.array_equal(np.unique(big), PART)


def test_augmentation_keeps_labels_and_stays_close(pool: Tensors) -> None:
    plain, augmented = _stream(pool).day(5), _stream(pool, augment=True).day(5)
    assert torch.equal(plain.y, augmented.y)
    assert not torch.equal(plain.x, augmented.x)
    # Small transforms: the augmented images still correlate with the originals.
    smooth = torch.nn.functional.avg_pool2d(pool.x, 3, 1, 1)  # random pixels need smoothing
    s_pool = Tensors(smooth, pool.y)
    a, b = _stream(s_pool).day(5).x, _stream(s_pool, augment=True).day(5).x
    corr = torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1]
    assert corr > 0.5


def test_zero_augmentation_is_identity() -> None:
    x = torch.randn(4, 3, 12, 20)
    out = augment_images(x, Augmentation(0.0, 0.0, 0.0), np.random.default_rng(0))
    assert torch.allclose(out, x, atol=1e-5)


def test_noise_level() -> None:
    x = torch.zeros(64, 1, 16, 16)
    out = augment_images(x, Augmentation(0.0, 0.0, 0.05), np.random.default_rng(0))
    assert abs(out.std().item() - 0.05) < 0.005


def _bar_orientation(img: torch.Tensor) -> tuple[float, float]:
    """(angle in degrees, length std) of the intensity mass's principal axis."""
    w = img.clamp_min(0)
    r, c = torch.meshgrid(
        torch.arange(img.shape[0], dtype=torch.float32),
        torch.arange(img.shape[1], dtype=torch.float32),
        indexing="ij",
    )
    m = w.sum()
    dr, dc = r - (w * r).sum() / m, c - (w * c).sum() / m
    crr, ccc, crc = [(w * a * b).sum().item() / m.item() for a, b in ((dr, dr), (dc, dc), (dr, dc))]
    angle = math.degrees(0.5 * math.atan2(2 * crc, ccc - crr))
    major = 0.5 * (crr + ccc) + math.sqrt(0.25 * (ccc - crr) ** 2 + crc**2)
    return angle, math.sqrt(major)


@pytest.mark.parametrize(("h", "w"), [(33, 33), (33, 65)])
def test_rotation_is_a_rigid_turn_within_bounds(h: int, w: int) -> None:
    angles = []
    for seed in range(4):
        x = torch.zeros(1, 1, h, w)
        x[0, 0, h // 2, w // 2 - 12 : w // 2 + 13] = 1.0  # a horizontal bar through the centre
        out = augment_images(x, Augmentation(0.0, 40.0, 0.0), np.random.default_rng(seed))
        angle, length = _bar_orientation(out[0, 0])
        _, length_before = _bar_orientation(x[0, 0])
        assert abs(angle) <= 40.5
        # Aspect-correct: the bar keeps its length on non-square images too.
        assert abs(length - length_before) / length_before < 0.05
        angles.append(angle)
    assert max(angles) - min(angles) > 10  # different images get different turns


@pytest.mark.parametrize("s", [0, -5])
def test_samples_per_day_must_be_positive(pool: Tensors, s: int) -> None:
    with pytest.raises(FedbenchError, match=f"samples_per_day={s}"):
        DailyStream(pool, PART, s, 0, False)


def test_bad_days_and_partitions(pool: Tensors) -> None:
    stream = _stream(pool)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="numbered from 1"):
            stream.day(bad)
    with pytest.raises(ValueError, match="buffer_days"):
        stream.replay(3, -1)
    with pytest.raises(FedbenchError, match="empty"):
        DailyStream(pool, np.array([], dtype=np.int64), 10, 0, False)
    with pytest.raises(ValueError, match="outside the pool"):
        DailyStream(pool, np.array([POOL_SIZE]), 10, 0, False)


def test_replay_is_the_earlier_days(pool: Tensors) -> None:
    stream = _stream(pool, augment=True)
    replay = stream.replay(6, 2)
    assert torch.equal(replay.x, torch.cat([stream.day(4).x, stream.day(5).x]))
