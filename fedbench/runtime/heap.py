"""Give freed heap memory back to the OS after a large transient (glibc's `malloc_trim`).

Drawing a 1,000,000-device population allocates and frees hundreds of MB of
numpy temporaries, and a worker's training call frees its activations when
it returns. glibc keeps freed heap pages for later allocations, so without
this the server's resident memory would stay at the draw's peak for the
whole run (~350 MB more at 1,000,000 devices), and a Ray worker would hold
~100 MB of a finished call's memory while it waits for the next one. The
server releases after the draw (fedbench.server.app), a worker after each
device's call (fedbench.client.app's `release_mod`). A C library without
`malloc_trim` (macOS, musl) makes `release` a no-op.

Releasing after each call, not a fixed mmap threshold (MALLOC_MMAP_THRESHOLD_=1 MiB,
which the workers had until issue 49): with it every tensor above 1 MiB was mapped
afresh and page-faulted on each allocation. On a quiet 2-core host (2026-12-01):
benchmarks/throughput.py's DenseNet40 x4 warm round 10.15 s with the threshold, 5.81 s
releasing after each call (the bare torch loop 4.38 and 4.05 s in the same two runs);
benchmarks/scale.py at 100,000 devices 29.0 s start to exit with a peak RSS of the
process tree of 1.96 GB (target <= 2 GB; with neither: 32.1 s, 2.07 GB; the threshold's
committed figures, 2026-11-26: 49.2 s, 1.86 GB).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc(name: str) -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """The C library's function `name`; None where there is no such function (not glibc)."""
    found = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(found), name, None) if found else None
    except OSError:
        return None


def release() -> bool:
    """Return the heap's free pages to the OS; whether the C library could."""
    trim = _libc("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True
