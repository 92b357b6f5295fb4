"""Freed heap pages go back to the OS after the population draw and after each device's call."""

from __future__ import annotations

import os
import subprocess
import sys

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
# frees the large ones, through the ClientApp's release mod or alone: prints the MB the
# call left resident.
_HELD_AFTER_CALL = """
import ctypes, ctypes.util, sys
import torch
from fedbench.client.app import release_mod

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
    assert release_mod(None, None, call) == "reply"
else:
    call(None, None)
print(anon() - before)
"""


def _held_after_call(how: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _HELD_AFTER_CALL, how],
        env={k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_workers_call_gives_its_freed_tensors_back() -> None:
    """The 64 MB a device's call freed leave the worker once the call returns, where
    glibc alone keeps them resident for the next call."""
    assert _held_after_call("alone") >= 48  # all 64 MB, measured
    assert _held_after_call("mod") <= 8


def test_the_client_app_releases_after_each_device() -> None:
    # Inside group_mod, so a message for many devices releases after each one's call.
    from fedbench.client import app
    from fedbench.client.group import group_mod

    assert app.app._mods == [group_mod, app.release_mod]
