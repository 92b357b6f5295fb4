"""Reading updates once: the fast .npy reader agrees with Flower's, and refuses what numpy would."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord

from fedbench.arrays import DecodedArray, decode, encode, state_dict_record
from fedbench.server.replies import conform


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(0).random((3, 4)).astype(np.float32),
        np.arange(5, dtype=np.int64),
        np.array(3.5),  # 0-d (BatchNorm's num_batches_tracked is one)
        np.zeros((0, 3), dtype=np.float16),
        np.ones((2, 1, 1), dtype=">f8"),  # big-endian
    ],
)
def test_decode_reads_what_numpy_wrote(values: np.ndarray) -> None:
    array = Array(values)
    got = decode(array)
    assert got.dtype == values.dtype and got.shape == values.shape
    assert np.array_equal(got, values)


def test_odd_files_fall_back_to_numpy_which_never_unpickles() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    array = Array(dtype="object", shape=(1,), stype="numpy.ndarray", data=buffer.getvalue())
    with pytest.raises(ValueError, match="pickle"):
        decode(array)
    truncated = Array(np.arange(100, dtype=np.float32))
    truncated.data = truncated.data[:-8]
    with pytest.raises(ValueError):
        decode(truncated)


def test_a_conform_hands_its_values_to_the_aggregation() -> None:
    reference = ArrayRecord([np.zeros((2, 2), np.float32)])
    update = ArrayRecord([np.ones((2, 2), np.float32)])
    checked, problem = conform(update, reference)
    assert problem == "" and checked is not None
    array = next(iter(checked.values()))
    assert isinstance(array, DecodedArray) and np.array_equal(array.numpy(), np.ones((2, 2)))
    wrong = ArrayRecord([np.ones((3,), np.float32)])
    assert conform(wrong, reference) == (None, "update '0' has shape (3,), expected (2, 2)")


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).random((3, 4)).astype(np.float32),
        np.array(7, dtype=np.int64),  # 0-d
        np.zeros((0, 3), dtype=np.float16),
        np.ones((2, 1, 1), dtype=">f8"),
    ],
)
def test_encode_writes_what_numpy_save_writes(values: np.ndarray) -> None:
    ours, flowers = encode(values), Array(values)
    assert ours.data == flowers.data
    assert (ours.dtype, ours.shape, ours.stype) == (flowers.dtype, flowers.shape, flowers.stype)


def test_a_fortran_ordered_array_reads_back_the_same() -> None:
    values = np.arange(12, dtype=np.float32).reshape(3, 4).T  # F-contiguous
    assert np.array_equal(decode(encode(values)), values)
    state = {"w": torch.arange(6.0).reshape(2, 3), "n": torch.tensor(3)}
    record = state_dict_record(state)
    assert record["w"].data == ArrayRecord(state)["w"].data
    assert record["n"].data == ArrayRecord(state)["n"].data
