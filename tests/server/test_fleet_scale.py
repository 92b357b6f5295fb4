"""The server's start-up over a large fleet keeps nothing per device beyond numpy columns."""

from __future__ import annotations

import numpy as np

from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.schema import DefenseConfig
from fedbench.scenarios.daily import DailyScenario
from fedbench.server.app import _per_profile
from fedbench.server.apps import ExampleCounts
from fedbench.server.defense import Defense
from fedbench.server.fleet_view import FleetView
from tests.analyze.large import phones
from tests.bad_inputs import _typed

PHONES = ["fleet=phones_100", "+fleet.scale=20000", "data.partition.scheme=sampled"]


def test_predicted_oom_is_counted_per_profile() -> None:
    fleet = expand_fleet({"devices": [{"profile": "rpi4", "count": 3}, {"profile": "pixel2"}]})
    assert _per_profile(fleet, np.array([0, 2, 3])) == {"rpi4": 2, "pixel2": 1}
    assert _per_profile(fleet, np.array([], dtype=np.int64)) == {}


def test_the_defense_asks_a_device_its_examples_without_a_dict_of_the_fleet() -> None:
    devices = expand_fleet(phones(20_000))
    scenario = DailyScenario(days=1, new_samples_per_day=24)  # its count needs no data
    counts = ExampleCounts(devices, scenario, None)  # type: ignore[arg-type]
    defense = Defense.build(DefenseConfig(), devices, counts)
    assert defense.examples is counts  # kept as given, not copied into a dict
    expected = scenario.expected_examples(None, 19_999)  # type: ignore[arg-type]
    assert defense.examples_bound(devices[19_999].name) == expected
    assert defense.examples_bound("nobody-000") == DefenseConfig().max_examples


def test_the_view_reads_profiles_from_the_fleets_columns() -> None:
    experiment = _typed(PHONES)
    devices = expand_fleet(experiment.fleet)  # type: ignore[attr-defined]
    view = FleetView(devices, experiment)  # type: ignore[arg-type]
    by_hand = FleetView(tuple(devices[:1000]), experiment)  # a hand-made tuple of specs
    names = [view.names[c] for c in view.code[:1000]]
    assert names == [d.profile for d in devices[:1000]]
    assert [by_hand.names[c] for c in by_hand.code] == names
