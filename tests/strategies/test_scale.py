"""Selection stays vectorised: a strategy's Python-level work does not grow with the fleet.

Counted, not timed: every Python function call and every call into C
(numpy) that `select` makes is counted with sys.setprofile, on a 10,000- and
a 1,000,000-device ledger. Whole-array numpy is the same few hundred calls at
any size; a Python loop over devices (or a Python object per device) is a
million more, and fails here at once, on any host, however loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

import pytest

from tests.helpers import load_benchmark


def _bench() -> ModuleType:
    return load_benchmark("selection")


def calls(work: Callable[[], object]) -> int:
    """Python and C calls `work` makes (numpy's own loops are inside one C call)."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def test_every_strategys_select_is_whole_array_work_at_a_million_devices() -> None:
    bench = _bench()
    counted: dict[int, dict[str, int]] = {}
    for n in (10_000, 1_000_000):
        ledger = bench.fabricated_ledger(bench.fleet(n), seed=1)
        counted[n] = {}
        for name, strategy in bench.strategies().items():
            picked: list[Any] = []

            def select(s: Any = strategy, lg: Any = ledger, out: list[Any] = picked) -> None:
                out.append(s.select(lg, 11, 0.0))

            counted[n][name] = calls(select)
            assert len(picked[0]) == 100, (name, n)
    for name, small in counted[10_000].items():
        large = counted[1_000_000][name]
        # The same calls at 100x the fleet (measured: equal, to within a few; a loop over
        # devices would add a million).
        assert large <= small + 100, f"{name}: {small} calls at 10k, {large} at 1M"


def test_ledger_memory_is_linear_and_small() -> None:
    bench = _bench()
    small, large = bench.ledger_memory(bench.fleet(1_000)), bench.ledger_memory(bench.fleet(20_000))
    assert small[0] == large[0] < 256  # array bytes per device, independent of n
    assert large[1] == pytest.approx(large[0], rel=0.05)  # nothing hidden beyond the arrays
