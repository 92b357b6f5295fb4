"""FedScale's trace pickles are read with a restricted unpickler: a crafted file runs nothing."""

from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from fedbench.errors import FedbenchError
from fedbench.population import fedscale


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_a_crafted_trace_is_refused_naming_the_file_and_the_global(
    tmp_path: Path, protocol: int
) -> None:
    marker = tmp_path / "pwned"
    trace = tmp_path / "client_device_capacity"
    data = {1: {"computation": 2.0, "communication": 100.0}, 2: _Payload(marker)}
    trace.write_bytes(pickle.dumps(data, protocol=protocol))
    with pytest.raises(FedbenchError) as refused:
        fedscale.convert(str(trace), None, str(tmp_path / "out"))
    message = str(refused.value)
    assert str(trace) in message and "posix.system" in message and "\n" not in message
    assert not marker.exists()


def test_an_object_array_cannot_smuggle_objects_in(tmp_path: Path) -> None:
    trace = tmp_path / "client_behave_trace"
    trace.write_bytes(pickle.dumps({1: {"active": np.array([object()], dtype=object)}}))
    with pytest.raises(FedbenchError, match="numpy.dtype"):
        fedscale.convert(None, str(trace), str(tmp_path / "out"))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_fedscale_shaped_traces_still_convert(tmp_path: Path, protocol: int) -> None:
    # What FedScale's files hold: dicts keyed by client id, numbers, lists, strings
    # (numpy scalars and arrays too, where they were made with numpy).
    capacity = {
        1: {"computation": np.float64(20.0), "communication": 1000},
        2: collections.OrderedDict(computation=10.0, communication=np.int64(2000)),
    }
    behave = {
        1: {
            "duration": 100,
            "inactive": np.array([50]),
            "finish_time": 100,
            "active": [0],
            "model": "SM-G900F",
        },
        2: {"duration": 100, "inactive": [80], "finish_time": 100, "active": {10}, "model": "x"},
    }
    (tmp_path / "cap").write_bytes(pickle.dumps(capacity, protocol=protocol))
    (tmp_path / "beh").write_bytes(pickle.dumps(behave, protocol=protocol))
    written = fedscale.convert(str(tmp_path / "cap"), str(tmp_path / "beh"), str(tmp_path / "o"))
    assert [p.name for p in written] == ["capacity.csv", "availability.csv"]
    rows = (tmp_path / "o" / "availability.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[1].startswith("0,0")
