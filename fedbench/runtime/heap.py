"""Give freed heap memory back to the OS after a large transient (glibc's `malloc_trim`).

Drawing a 1,000,000-device population allocates and frees hundreds of MB of
numpy temporaries. glibc keeps freed heap pages for later allocations, so
without this the server's resident memory would stay at the draw's peak for
the whole run (~350 MB more at 1,000,000 devices, beside the Ray workers
that the process tree's memory also counts). A C library without
`malloc_trim` (macOS, musl) makes `release` a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def release() -> bool:
    """Return the heap's free pages to the OS; whether the C library could."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
