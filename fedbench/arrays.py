"""Model arrays on the wire without Flower's per-array .npy parsing and writing.

A Flower `Array` holds an .npy file; `Array.numpy()` parses its header with
`ast.literal_eval` on every call, and `Array(ndarray)` runs `np.save`, both
of which cost more than the values when a round brings 100 updates of
20-odd small tensors each. `decode` reads the header numpy itself writes
with one regular expression and views the bytes in place (read-only);
anything unusual falls back to `Array.numpy()`, which never unpickles.
`encode` writes the bytes `np.save` writes, its header built once per dtype
and shape.
"""

from __future__ import annotations

import functools
import io
import math
import re

import numpy as np
import torch
from flwr.app import Array, ArrayRecord

_MAGIC = b"\x93NUMPY"
_HEADER = re.compile(
    r"\{'descr': '([<>|=]?[a-zA-Z]\d*)', 'fortran_order': False, 'shape': \(((?:\d+, ?)*\d*)\), \}"
)


def decode(array: Array) -> np.ndarray:
    """The array's values (a read-only view of its bytes when they are plain .npy)."""
    data = array.data
    if not isinstance(data, bytes) or data[:6] != _MAGIC or len(data) < 12:
        return array.numpy()
    major = data[6]
    size = 2 if major == 1 else 4
    start = 8 + size
    length = int.from_bytes(data[8:start], "little")
    match = _HEADER.match(data[start : start + length].decode("latin1").strip())
    if match is None:
        return array.numpy()
    dtype = np.dtype(match.group(1))
    if dtype.hasobject:
        return array.numpy()
    shape = tuple(int(x) for x in match.group(2).split(",") if x.strip())
    count = math.prod(shape)
    try:
        values = np.frombuffer(data, dtype=dtype, count=count, offset=start + length)
    except ValueError:
        return array.numpy()  # truncated: let numpy say so
    return values.reshape(shape)


class DecodedArray(Array):
    """A Flower Array whose values were read (and checked) once: `numpy()` returns them.

    The server checks every update before aggregation; handing the Flower
    strategy the values it already read spares it a second parse of every
    array of every update. The bytes are the client's, unchanged.
    """

    _values: np.ndarray

    @classmethod
    def of(cls, array: Array, values: np.ndarray) -> DecodedArray:
        # The fields of the checked array as they are: Array.__init__ would validate
        # the same bytes again, for every array of every update.
        decoded = cls.__new__(cls)
        decoded.__dict__.update(vars(array))
        decoded._values = values
        return decoded

    def numpy(self) -> np.ndarray:
        return self._values


def encode(values: np.ndarray) -> Array:
    """An Array of `values`: byte for byte what `Array(values)` (np.save) holds for a
    C-ordered array (any other is written in C order, which reads back the same)."""
    if not values.flags.c_contiguous:
        values = values.copy(order="C")  # np.save writes C order (fortran_order False)
    header = _header(values.dtype.str, tuple(values.shape))
    return Array(
        dtype=str(values.dtype),
        shape=tuple(values.shape),
        stype="numpy.ndarray",
        data=header + values.tobytes(),
    )


def state_dict_record(state: dict[str, torch.Tensor]) -> ArrayRecord:
    """`ArrayRecord(state_dict)`, each tensor written by `encode`."""
    record = ArrayRecord()
    for key, tensor in state.items():
        record[key] = encode(tensor.detach().cpu().numpy())
    return record


@functools.lru_cache(maxsize=1024)
def _header(descr: str, shape: tuple[int, ...]) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return out.getvalue()
