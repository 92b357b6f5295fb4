"""Shared fixtures for the data tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from fedbench.data.splits import clear_cache


@pytest.fixture(autouse=True)
def _one_thread_and_fresh_cache() -> Iterator[None]:
    # The machine is shared; and cached splits must not leak between tests.
    torch.set_num_threads(1)
    clear_cache()
    yield
    clear_cache()
