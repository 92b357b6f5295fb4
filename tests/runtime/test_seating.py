"""How the simulation's pool divides a round's devices into worker calls."""

from __future__ import annotations

import pytest

from fedbench.runtime.seating import PooledSeating


@pytest.mark.parametrize(
    ("devices", "workers", "expected"),
    [
        (1, 2, 1),
        (4, 2, 1),  # DenseNet40 x4 on 2 workers: a call each, the free worker takes the next
        (8, 2, 1),
        (9, 2, 2),
        (100, 2, 13),  # 8 calls of at most 13: 4 a worker, the model sent 8 times, not 100
        (100, 16, 2),
    ],
)
def test_each_worker_gets_several_calls_of_the_round(
    devices: int, workers: int, expected: int
) -> None:
    seating = PooledSeating(list(range(1, workers + 1)), workers=workers)
    per_call = seating.devices_per_call(devices)
    assert per_call == expected
    calls = -(-devices // per_call)
    # At least two calls a worker (or one a device): a worker left with the slow devices
    # hands its next call to a free one, where one call a worker would make it wait.
    assert calls >= min(devices, 2 * workers)


def test_a_fixed_number_per_call_wins() -> None:
    assert PooledSeating([1, 2], workers=2, per_call=50).devices_per_call(100) == 50


def test_without_a_worker_count_the_nodes_count() -> None:
    assert PooledSeating([1, 2, 3], workers=None).devices_per_call(100) == 9
