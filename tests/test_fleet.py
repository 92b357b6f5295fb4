from __future__ import annotations

from collections import Counter

import pytest

from fedbench.errors import FedbenchError
from fedbench.experiment.fleet import expand_fleet


def test_expansion_names_and_indices() -> None:
    fleet = expand_fleet({"devices": [{"profile": "rpi4", "count": 2}, {"profile": "host"}]})
    assert [d.name for d in fleet] == ["rpi4-000", "rpi4-001", "host-000"]
    assert [d.index for d in fleet] == [0, 1, 2]


def test_profile_files_name_devices_by_their_stem() -> None:
    fleet = expand_fleet({"devices": [{"profile": "/tmp/x/rpi4_tiny.yaml", "count": 2}]})
    assert [d.name for d in fleet] == ["rpi4_tiny-000", "rpi4_tiny-001"]
    assert fleet[0].profile == "/tmp/x/rpi4_tiny.yaml"


def test_scale_keeps_the_mix() -> None:
    fleet = expand_fleet(
        {"devices": [{"profile": "a", "count": 3}, {"profile": "b", "count": 1}], "scale": 1000}
    )
    counts = Counter(d.profile for d in fleet)
    assert len(fleet) == 1000 and counts["a"] == 750 and counts["b"] == 250


@pytest.mark.parametrize(
    ("fleet", "match"),
    [
        ({"devices": []}, "non-empty list"),
        ({"devices": [{"count": 2}]}, r"fleet.devices\[0\].profile: missing"),
        ({"devices": [{"profile": "a", "count": 0}]}, r"fleet.devices\[0\].count=0: must be >= 1"),
        ({"devices": [{"profile": "a", "cuont": 2}]}, r"fleet.devices\[0\].cuont: unknown key"),
        (
            {"devices": [{"profile": "a"}, {"profile": "b"}], "scale": 1},
            r"fleet.scale=1: must be >=",
        ),
    ],
)
def test_impossible_fleets_are_refused(fleet: dict, match: str) -> None:
    with pytest.raises(FedbenchError, match=match):
        expand_fleet(fleet)


def test_a_fleet_is_its_groups_and_finds_a_device_by_name_both_ways() -> None:
    fleet = expand_fleet(
        {
            "devices": [
                {"profile": "rpi4", "count": 2},
                {"profile": "pixel2", "count": 1500},
                {"profile": "rpi4", "count": 3},  # the stem's numbering carries on
            ]
        }
    )
    names = [d.name for d in fleet]
    assert names[:3] == ["rpi4-000", "rpi4-001", "pixel2-000"]
    assert names[-3:] == ["rpi4-002", "rpi4-003", "rpi4-004"] and names[1501] == "pixel2-1499"
    assert all(fleet.index_of(name) == i for i, name in enumerate(names))
    assert fleet[-1] == fleet[len(fleet) - 1] and fleet[1:3] == tuple(list(fleet)[1:3])
    for nobody in ("rpi4-005", "rpi4-1", "rpi4-0001", "pixel2", "jetson-000", "pixel2-x"):
        assert fleet.index_of(nobody) is None, nobody
    assert fleet.profile_names == ("rpi4", "pixel2")
    assert fleet.profile_code.tolist() == [0, 0] + [1] * 1500 + [0, 0, 0]
    assert fleet.profile_counts() == {"rpi4": 5, "pixel2": 1500}


def test_a_million_devices_are_no_million_objects() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        fleet = expand_fleet({"devices": [{"profile": "pixel2", "count": 3}], "scale": 1_000_000})
        index = fleet.index_of("pixel2-999999")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(fleet) == 1_000_000 and index == 999_999
    assert peak < 1e6, f"{peak / 1e6:.1f} MB"  # a DeviceSpec per device would be ~200 MB
