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
