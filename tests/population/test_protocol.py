"""A device's draw crosses the wire in its task record and comes back whole."""

from __future__ import annotations

import pytest

from fedbench.core.device import DeviceState, Traits
from fedbench.errors import FedbenchError
from fedbench.protocol import TrainTask, tasks_from, tasks_record


def _task(i: int, traits: Traits | None) -> TrainTask:
    return TrainTask(3, 2, i, f"pixel2-00{i}", 7200.0, 1, DeviceState(25.0, 60.0, 10.0), traits)


def test_traits_round_trip_through_the_task_record() -> None:
    a = Traits(0.9, 30.0, 8.0, 40.0, 10.5, True)
    b = Traits(1.1, 80.0, 20.0, 12.0, float("nan"), False)
    back = tasks_from(tasks_record([_task(0, a), _task(1, b)], "{}"))
    assert back[0].traits == a
    assert back[1].traits is not None and back[1].traits.speed == 1.1
    assert not back[1].traits.has_battery and not back[1].traits.cellular
    assert tasks_from(tasks_record([_task(0, None)], "{}"))[0].traits is None


def test_a_message_mixing_drawn_and_undrawn_devices_is_refused() -> None:
    with pytest.raises(ValueError, match="all carry traits or none"):
        tasks_record([_task(0, Traits(1, 1, 1, 1, 1, False)), _task(1, None)], "{}")


def test_a_malformed_trait_list_is_a_clear_error() -> None:
    record = tasks_record([_task(0, Traits(1, 1, 1, 1, 1, False))], "{}")
    record["trait-speed"] = [1.0, 2.0]
    with pytest.raises(FedbenchError, match="trait-speed: expected 1 values"):
        tasks_from(record)
