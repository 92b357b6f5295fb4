"""Availability and capacity traces replace the drawn values; FedScale's layout converts."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pytest

from fedbench.devices.profile import load_profile
from fedbench.errors import FedbenchError
from fedbench.experiment.population import PopulationConfig, TraceConfig
from fedbench.population import fedscale
from fedbench.population.draw import Population, draw
from fedbench.population.traces import read_table, write_table

NAMES = ["pixel2-000", "pixel2-001", "pixel2-002"]
H = 3600.0


def _pop(tmp: Path, availability: dict | None = None, capacity: dict | None = None) -> Population:
    trace = TraceConfig(
        availability=str(write_table(tmp / "a.csv", availability)) if availability else None,
        capacity=str(write_table(tmp / "c.csv", capacity)) if capacity else None,
    )
    config = PopulationConfig(trace=trace)
    code = np.zeros(3, dtype=np.int32)
    return draw(config, [load_profile("pixel2")], code, 0, NAMES)


def test_an_availability_trace_replaces_the_drawn_windows_of_the_devices_it_names(
    tmp_path: Path,
) -> None:
    drawn = _pop(tmp_path)
    pop = _pop(
        tmp_path,
        availability={
            "device": [0, 0, "pixel2-001"],
            "start_s": [1 * H, 5 * H, 0.0],
            "end_s": [2 * H, 6 * H, 3 * H],
            "state": ["charging", "available", "unavailable"],
        },
    )
    w = pop.windows
    # Device 0: two intervals in a 6 h period (the file's last end), repeating.
    for t, inside, charging in (
        (1.5 * H, True, True),
        (5.5 * H, True, False),
        (3 * H, False, False),
    ):
        for shift in (0.0, 6 * H, 60 * H):
            assert w.inside(t + shift)[0] == inside
            assert w.charging_at(t + shift)[0] == charging
    # Device 1: only unavailable rows - never available; device 2 keeps its draw.
    assert not any(w.inside(t)[1] for t in np.arange(0, 24 * H, 600))
    for t in np.arange(0, 48 * H, 1800):
        assert w.inside(t)[2] == drawn.windows.inside(t)[2]
    assert w.hours_per_day()[0] == pytest.approx(2 / 6 * 24)


def test_a_capacity_trace_replaces_speed_and_bandwidth(tmp_path: Path) -> None:
    drawn = _pop(tmp_path)
    pop = _pop(
        tmp_path,
        capacity={"device": ["pixel2-002"], "speed": [0.5], "down_mbps": [7.0], "up_mbps": [2.0]},
    )
    assert pop.speed[2] == 0.5 and pop.down_mbps[2] == 7.0 and pop.up_mbps[2] == 2.0
    assert pop.rtt_ms[2] == drawn.rtt_ms[2]  # no rtt_ms column: the draw stays
    assert np.array_equal(pop.speed[:2], drawn.speed[:2])


@pytest.mark.parametrize(
    ("availability", "message"),
    [
        ({"device": [0], "start_s": [0], "end_s": [1]}, "missing state"),
        ({"device": [0], "start_s": [0], "end_s": [1], "state": ["on"]}, "state 'on'; valid"),
        ({"device": [7], "start_s": [0], "end_s": [1], "state": ["charging"]}, "device '7' is not"),
        ({"device": [0], "start_s": [5], "end_s": [1], "state": ["charging"]}, "start_s < end_s"),
        ({"device": [0], "start_s": ["x"], "end_s": [1], "state": ["charging"]}, "start_s"),
    ],
)
def test_a_bad_availability_trace_is_one_clear_error(
    tmp_path: Path, availability: dict, message: str
) -> None:
    with pytest.raises(FedbenchError, match=message):
        _pop(tmp_path, availability=availability)


def test_a_missing_trace_file_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match=r"fleet.population.trace.capacity='.*nope.csv': no"):
        read_table(tmp_path / "nope.csv", "fleet.population.trace.capacity", ("device",))


@pytest.mark.skipif(
    importlib.util.find_spec("pandas") is not None, reason="pandas is installed: Parquet works"
)
def test_parquet_without_pandas_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match="pip install pandas pyarrow"):
        write_table(tmp_path / "a.parquet", {"device": [0]})


def _fedscale_files(tmp: Path) -> tuple[Path, Path]:
    """Small files in FedScale's published layout (its 'Device Trace File Formats')."""
    capacity = {
        12: {"computation": 100.0, "communication": 8000.0},
        3: {"computation": 50.0, "communication": 2000.0},
        40: {"computation": 200.0, "communication": 40000.0},
    }
    behave = {
        3: {
            "duration": 7200,
            "inactive": [3600, 9000],
            "finish_time": 10_000,
            "active": [0, 7200],
            "model": "SM-G950F",
        },
        12: {
            "duration": 100,
            "inactive": [500],
            "finish_time": 1000,
            "active": [400],
            "model": "Pixel 2",
        },
        40: {"duration": 0, "inactive": [], "finish_time": 1000, "active": [900], "model": "Mi 9"},
    }
    cap, beh = tmp / "client_device_capacity", tmp / "client_behave_trace"
    cap.write_bytes(pickle.dumps(capacity))
    beh.write_bytes(pickle.dumps(behave))
    return cap, beh


def test_fedscale_traces_convert_to_tables_a_fleet_reads(tmp_path: Path) -> None:
    cap, beh = _fedscale_files(tmp_path)
    out = fedscale.run([f"capacity={cap}", f"behave={beh}", f"out={tmp_path / 'out'}"])
    assert "fleet.population.trace.capacity=" in out
    capacity = read_table(tmp_path / "out" / "capacity.csv", "c", ("device", "speed"))
    # Ascending client id -> device 0, 1, 2; speed relative to the median client (100).
    assert capacity["speed"] == ["2.0", "1.0", "0.5"]
    assert capacity["down_mbps"] == ["2.0", "8.0", "40.0"]
    rows = read_table(tmp_path / "out" / "availability.csv", "a", ("device", "start_s"))
    assert list(zip(rows["device"], rows["start_s"], rows["end_s"], strict=True)) == [
        ("0", "0.0", "3600.0"),
        ("0", "7200.0", "9000.0"),
        ("1", "400.0", "500.0"),
        ("2", "900.0", "1000.0"),  # no deactivation: active to the period's end
    ]
    pop = _pop_from(tmp_path / "out")
    assert pop.speed.tolist() == [2.0, 1.0, 0.5]
    assert pop.windows.inside(10_000 + 100)[0] and not pop.windows.inside(10_000 + 5000)[0]
    assert pop.windows.charging_at(450.0)[1] and not pop.windows.inside(600.0)[1]


def _pop_from(folder: Path) -> Population:
    trace = TraceConfig(
        availability=str(folder / "availability.csv"), capacity=str(folder / "capacity.csv")
    )
    code = np.zeros(3, dtype=np.int32)
    return draw(PopulationConfig(trace=trace), [load_profile("pixel2")], code, 0, NAMES)


def test_fedscale_conversion_limits_and_refuses_bad_files(tmp_path: Path) -> None:
    cap, _ = _fedscale_files(tmp_path)
    fedscale.run([f"capacity={cap}", f"out={tmp_path / 'o'}", "devices=2"])
    table = read_table(tmp_path / "o" / "capacity.csv", "c", ("device",))
    assert table["device"] == ["0", "1"]
    bad = tmp_path / "bad"
    bad.write_bytes(pickle.dumps({1: {"computation": 1.0}}))
    with pytest.raises(FedbenchError, match="'computation' and 'communication'"):
        fedscale.run([f"capacity={bad}", f"out={tmp_path / 'o'}"])
    (tmp_path / "text").write_text("not a pickle")
    with pytest.raises(FedbenchError, match="not a pickled FedScale trace"):
        fedscale.run([f"behave={tmp_path / 'text'}", f"out={tmp_path / 'o'}"])
