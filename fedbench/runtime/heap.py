"""Give freed heap memory back to the OS after a large transient (glibc's `malloc_trim`).

Drawing a 1,000,000-device population allocates and frees hundreds of MB of
numpy temporaries, and a worker's training call frees its activations when
it returns. glibc keeps freed heap pages for later allocations, so without
this the server's resident memory would stay at the draw's peak for the
whole run (~350 MB more at 1,000,000 devices), and a Ray worker would hold
~100 MB of a finished call's memory while it waits for the next round. The
server releases after the draw (fedbench.server.app), a worker once it has been
idle `IDLE_S` after a call (fedbench.client.app's `release_mod`). A C library without
`malloc_trim` (macOS, musl) makes `release` a no-op.

Releasing after each call, not a fixed mmap threshold (MALLOC_MMAP_THRESHOLD_=1 MiB,
which the workers had until issue 49): with it every tensor above 1 MiB was mapped
afresh and page-faulted on each allocation. On a quiet 2-core host (2026-12-01):
benchmarks/throughput.py's DenseNet40 x4 warm round 10.15 s with the threshold, 5.81 s
releasing after each call (the bare torch loop 4.38 and 4.05 s in the same two runs);
benchmarks/scale.py at 100,000 devices 29.0 s start to exit with a peak RSS of the
process tree of 1.96 GB (target <= 2 GB; with neither: 32.1 s, 2.07 GB; the threshold's
committed figures, 2026-11-26: 49.2 s, 1.86 GB).

A worker releases once it has been idle for `IDLE_S` (`IdleRelease`), not after every
call: a call that starts after a release page-faults its activations back in. One
thread, DenseNet40, 64 samples at batch 16 on the 2-core host (2026-12-07): 2.50-2.76 s
and 22,000-25,000 minor faults a call after a call, 2.81-2.88 s and 110,000-115,000
faults after a release (0.22-0.25 s of system time). A worker's calls of one round come
back to back, and between rounds it waits for the server's aggregation and evaluation
(DenseNet40 on the digits test split: 5-10 s on the server's one thread). A release per
call cost a DenseNet40 round 5% against plain Flower, whose workers never release, and a
release after 5 s idle still cost the first call of every round its page faults. Idle
for `IDLE_S`, the quarter second a release costs the next call is under 1% of the wait.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading

IDLE_S = 30.0  # a worker idle this long gives its heap back (module docstring)


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


class IdleRelease:
    """`release` once the process has been idle for `idle_s`: no call started since the last ended.

    `busy()` as a call starts (a pending release is dropped: the call would page its
    memory back in), `idle()` as it ends (a release is set for `idle_s` later, on a
    daemon timer thread, so it never holds the process's exit).
    """

    def __init__(self, idle_s: float = IDLE_S) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def busy(self) -> None:
        """A call starts: no release while it runs."""
        with self._lock:
            self._cancel()

    def idle(self) -> None:
        """A call ended: release if nothing has started `idle_s` from now."""
        with self._lock:
            self._cancel()
            self._timer = threading.Timer(self.idle_s, release)
            self._timer.daemon = True
            self._timer.start()

    # Simulation workers receive the ClientApp, this among its mods, pickled: a copy is
    # its idle time, with a lock of its own and nothing pending in the new process.
    def __getstate__(self) -> dict[str, float]:
        return {"idle_s": self.idle_s}

    def __setstate__(self, state: dict[str, float]) -> None:
        self.__init__(state["idle_s"])  # type: ignore[misc]

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
