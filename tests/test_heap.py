"""Freed heap pages go back to the OS after the population draw and after each device's call."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

# A child whose glibc keeps the heap's freed top (no automatic trim, which would otherwise
# return part of it on free, depending on what the process did before) frees ~190 MB of
# 64 KB arrays (below glibc's mmap threshold: they live on the heap), then releases:
# prints the MB of resident memory the release gave back.
_GIVEN_BACK = """
import ctypes, ctypes.util
import numpy as np
from fedbench.runtime import heap

ctypes.CDLL(ctypes.util.find_library("c")).mallopt(-1, 2**30)  # M_TRIM_THRESHOLD

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

held = [np.ones(8192) for _ in range(3000)]
del held
before = rss_mb()
assert heap.release()
print(before - rss_mb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_gives_freed_heap_pages_back() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _GIVEN_BACK], capture_output=True, text=True, check=True
    )
    assert float(out.stdout.split()[-1]) > 50, out.stdout  # measured: ~190 MB back


# A child whose glibc keeps what it frees (heap, not mmap, for blocks up to 32 MB, and no
# automatic trim: the state glibc drifts into once a worker has freed a large block) runs
# a "device call" that allocates 32 2 MB tensors with a small live one after each and
# frees the large ones, alone or through the ClientApp's release mod (idle 0.3 s), then
# waits `wait` seconds: prints the MB the call left resident.
_HELD_AFTER_CALL = """
import ctypes, ctypes.util, sys, time
import torch
from fedbench.client.app import ReleaseMod

libc = ctypes.CDLL(ctypes.util.find_library("c"))
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
libc.mallopt(M_TRIM_THRESHOLD, 2**30)

def anon():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) // 1024

small = []

def call(msg, context):
    big = []
    for _ in range(32):
        big.append(torch.ones(2**21 // 4))
        small.append(torch.ones(16))
    return "reply"

before = anon()
if sys.argv[1] == "mod":
    assert ReleaseMod(idle_s=0.3)(None, None, call) == "reply"
else:
    call(None, None)
time.sleep(float(sys.argv[2]))
print(anon() - before)
"""


def _held_after_call(how: str, wait_s: float) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _HELD_AFTER_CALL, how, str(wait_s)],
        env={k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_an_idle_worker_gives_its_calls_freed_tensors_back() -> None:
    """The 64 MB a device's call freed leave the worker once it has been idle for the
    mod's idle time, where glibc alone keeps them resident for ever."""
    assert _held_after_call("alone", 1.0) >= 48  # all 64 MB, measured
    assert _held_after_call("mod", 1.0) <= 8


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_call_that_follows_at_once_finds_the_memory_still_there() -> None:
    """Right after a call (the next device's call of the same round) nothing is released
    yet: the next call reuses the freed pages instead of page-faulting them in again."""
    assert _held_after_call("mod", 0.0) >= 48


def test_a_call_starting_cancels_the_pending_release(monkeypatch: pytest.MonkeyPatch) -> None:
    from fedbench.client.app import ReleaseMod
    from fedbench.runtime import heap

    released: list[int] = []

    def counted() -> bool:
        released.append(1)
        return True

    monkeypatch.setattr(heap, "release", counted)
    mod = ReleaseMod(idle_s=0.2)
    events = threading.Event()

    def call(msg: object, context: object) -> str:
        events.wait(0.3)  # the previous call's release would be due while this one runs
        return "reply"

    mod(None, None, lambda m, c: "reply")  # type: ignore[arg-type, return-value]
    assert mod(None, None, call) == "reply"  # type: ignore[arg-type]
    assert released == []  # the first call's release was dropped when the second began
    time.sleep(0.5)
    assert released == [1]  # once idle after the second, one release


def test_the_client_app_releases_after_each_device() -> None:
    # Inside group_mod, so a message for many devices releases after each one's call.
    from fedbench.client import app
    from fedbench.client.group import group_mod

    assert app.app._mods == [group_mod, app.release_mod]


def test_the_mod_travels_pickled_to_a_worker_without_its_timer() -> None:
    # Flower's simulation sends the ClientApp to Ray's workers with cloudpickle.
    import pickle

    from fedbench.client.app import ReleaseMod

    mod = ReleaseMod(idle_s=30.0)
    mod(None, None, lambda m, c: "reply")  # type: ignore[arg-type, return-value]  # pending
    copy = pickle.loads(pickle.dumps(mod))
    assert copy.heap.idle_s == 30.0 and copy.heap._timer is None
    mod.heap.busy()  # the original's timer, cancelled: nothing left running
