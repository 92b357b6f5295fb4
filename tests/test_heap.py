"""Freed heap pages go back to the OS after the population draw (glibc's malloc_trim)."""

from __future__ import annotations

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
