"""Reading a pickle that holds only plain data, without running anything it names.

`pickle.load` calls whatever global a file names (`os.system`, ...), so a
crafted file runs code the moment it is opened. Data sets such as FedScale's
device traces are pickles of dicts, lists, numbers and strings, which the
pickle machine builds from opcodes alone; the only globals such a file needs
are a few container types and numpy's numeric scalars and arrays. This reader
admits exactly those: any other global raises `Refused`, naming it, before it
is imported; numpy's admitted only with a numeric dtype (an object dtype would
smuggle arbitrary objects back in).
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import pickle
from collections.abc import Callable
from typing import IO, Any

import numpy as np

NUMERIC_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex


class Refused(Exception):
    """The pickle names a global this reader does not admit."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _numeric_dtype(*args: Any) -> np.dtype[Any]:
    dtype = np.dtype(*args)
    if dtype.kind not in NUMERIC_KINDS:
        raise Refused(f"numpy.dtype({dtype.str!r})")
    return dtype


def _scalar(dtype: np.dtype[Any], *args: Any) -> Any:
    if not isinstance(dtype, np.dtype) or dtype.kind not in NUMERIC_KINDS:
        raise Refused(f"a numpy scalar of dtype {dtype!r}")
    from numpy._core.multiarray import scalar  # type: ignore[attr-defined]

    return scalar(dtype, *args)


def _latin1(text: object, encoding: object = "latin1") -> bytes:
    """How protocols 0-2 spell a bytes object: `_codecs.encode(str, "latin1")`."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise Refused(f"_codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


def _reconstruct(cls: object, *args: Any) -> Any:
    if cls is not np.ndarray:
        raise Refused(f"numpy array reconstruction of {cls!r}")
    from numpy._core.multiarray import _reconstruct as reconstruct  # type: ignore[attr-defined]

    return reconstruct(cls, *args)


def _frombuffer(buffer: object, dtype: object, shape: object, order: object) -> Any:
    """Protocol 5's numpy array: its bytes, a dtype, a shape."""
    if not isinstance(dtype, np.dtype) or dtype.kind not in NUMERIC_KINDS:
        raise Refused(f"a numpy array of dtype {dtype!r}")
    from numpy._core.numeric import _frombuffer as frombuffer  # type: ignore[attr-defined]

    return frombuffer(buffer, dtype, shape, order)


# module, name -> what it loads as. numpy pickles name `numpy.core` (1.x) or `numpy._core` (2.x).
ADMITTED: dict[tuple[str, str], Callable[..., Any] | type] = {
    ("_codecs", "encode"): _latin1,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("numpy", "dtype"): _numeric_dtype,
    ("numpy", "ndarray"): np.ndarray,
    **{(f"numpy.{core}.multiarray", "scalar"): _scalar for core in ("core", "_core")},
    **{(f"numpy.{core}.multiarray", "_reconstruct"): _reconstruct for core in ("core", "_core")},
    **{(f"numpy.{core}.numeric", "_frombuffer"): _frombuffer for core in ("core", "_core")},
}


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Python 2's names (protocols 0-2), as pickle's own find_class maps them.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        admitted = ADMITTED.get((module, name))
        if admitted is None:
            raise Refused(f"{module}.{name}")
        return admitted

    def persistent_load(self, pid: Any) -> Any:
        raise Refused(f"persistent id {pid!r}")


def load_plain(file: IO[bytes]) -> Any:
    """The data in a pickle of plain containers and numbers; `Refused` for anything else."""
    return PlainUnpickler(file).load()


def loads_plain(data: bytes) -> Any:
    return load_plain(io.BytesIO(data))
