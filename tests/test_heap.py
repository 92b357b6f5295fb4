"""Freed heap pages go back to the OS after the population draw (glibc's malloc_trim)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedbench.runtime import heap


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_gives_freed_heap_pages_back() -> None:
    # Many 64 KB arrays (below glibc's mmap threshold: they live on the heap), freed.
    held = [np.ones(8192) for _ in range(3000)]  # ~190 MB
    del held
    before = _rss_mb()
    assert heap.release()
    assert _rss_mb() < before - 50, (before, _rss_mb())  # measured: ~100 MB back


# A child that frees one 16 MB tensor (glibc then raises its mmap threshold to that size),
# then frees 32 2 MB tensors with a small live one after each: prints the MB still held.
_HELD_AFTER_FREE = """
import torch
def anon():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) // 1024
first = torch.ones(16 * 2**20 // 4)
del first
before = anon()
big, small = [], []
for _ in range(32):
    big.append(torch.ones(2**21 // 4))
    small.append(torch.ones(16))
big.clear()
print(anon() - before)
"""


def _held_after_free(env: dict[str, str]) -> int:
    clean = {k: v for k, v in os.environ.items() if k != heap.MMAP_THRESHOLD_ENV}
    out = subprocess.run(
        [sys.executable, "-c", _HELD_AFTER_FREE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mmap threshold")
def test_the_workers_env_gives_freed_tensors_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process started with `worker_env` (Ray's workers) gives the 64 MB of freed
    tensors back to the OS, where glibc's default keeps them resident."""
    monkeypatch.delenv(heap.MMAP_THRESHOLD_ENV, raising=False)
    env = heap.worker_env()
    assert env == {heap.MMAP_THRESHOLD_ENV: str(heap.MMAP_THRESHOLD)}
    assert _held_after_free({}) >= 24  # glibc's default: measured 33
    assert _held_after_free(env) <= 8  # measured 0


def test_a_users_own_mmap_threshold_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(heap.MMAP_THRESHOLD_ENV, "65536")
    assert heap.worker_env() == {}
