from __future__ import annotations

import inspect
import warnings
from typing import Any

import flwr_datasets.partitioner as library
import numpy as np
import pytest
from datasets import Dataset

from fedbench.data import partition_cache, partitioners
from fedbench.data.partition import SAMPLED, partition, sizes
from fedbench.errors import FedbenchError
from fedbench.experiment.schema import PartitionConfig

LABELS = np.random.default_rng(0).integers(0, 10, size=1000)
OWNERS = np.random.default_rng(1).integers(0, 40, size=1000)

# One working setting per scheme, for 8 devices over LABELS (40 owners for natural ids).
SETTINGS: dict[str, dict[str, Any]] = {
    "iid": {},
    "dirichlet": {"alpha": 0.5},
    "inner_dirichlet": {"partition_sizes": [125] * 8, "alpha": 0.5},
    "pathological": {"num_classes_per_partition": 2},
    "shard": {"num_shards_per_partition": 3},
    "natural_id": {},
    "grouped_natural_id": {"group_size": 5},
    "size": {"partition_sizes": [50, 100, 150, 200, 100, 100, 100, 200]},
    "linear": {},
    "square": {},
    "exponential": {},  # 4 devices (DEVICES): at 8 the smallest would hold none
    "continuous": {"partition_by": "natural_id", "strictness": 0.5},
    "distribution": {
        "distribution_array": np.full((10, 10), 10).tolist(),
        "num_unique_labels_per_partition": 10,
        "preassigned_num_samples_per_label": 1,
    },
}


# Devices where 8 does not fit the scheme: natural_id has one per owner,
# distribution needs a multiple of the classes, exponential's smallest share is 2^-n.
DEVICES = {"natural_id": 40, "distribution": 10, "exponential": 4}


def _by_library(scheme: str, params: dict[str, Any], seed: int) -> list[np.ndarray]:
    """The same draw made directly with flwr-datasets, as a user of the library would."""
    cls = partitioners.library_schemes()[scheme]
    order = np.random.default_rng(seed).permutation(LABELS.size)
    data = Dataset.from_dict({"label": LABELS[order], "natural_id": OWNERS[order], "row": order})
    args = dict(params)
    if "distribution_array" in args:
        args["distribution_array"] = np.asarray(args["distribution_array"])
    accepted = inspect.signature(cls.__init__).parameters
    if "partition_by" in accepted:
        args.setdefault("partition_by", "natural_id" if "natural_id" in scheme else "label")
    for key, value in (("num_partitions", DEVICES.get(scheme, 8)), ("seed", seed)):
        if key in accepted:
            args[key] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = cls(**args)
        p.dataset = data
        return [np.sort(np.asarray(p.load_partition(i)["row"])) for i in range(p.num_partitions)]


def test_every_horizontal_library_partitioner_is_a_scheme() -> None:
    classes = {
        name
        for name, obj in vars(library).items()
        if inspect.isclass(obj) and issubclass(obj, library.Partitioner)
    }
    offered = {partitioners.scheme_name(c) for c in classes} - set(partitioners.excluded_schemes())
    assert offered - {""} == set(partitioners.library_schemes()) == set(SETTINGS)
    assert set(partitioners.excluded_schemes()) == {
        "id_to_size_fnc",
        "vertical_even",
        "vertical_size",
    }


def test_the_config_has_a_key_for_every_library_parameter() -> None:
    keys = set(PartitionConfig.__dataclass_fields__) - {"scheme", "size"}
    library_keys = {
        k for cls in partitioners.library_schemes().values() for k in partitioners.parameters(cls)
    }
    assert keys == library_keys


@pytest.mark.parametrize("scheme", sorted(SETTINGS))
def test_draws_come_from_the_library(scheme: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = partition(
            LABELS, DEVICES.get(scheme, 8), scheme, seed=4, params=SETTINGS[scheme], ids=OWNERS
        )
    theirs = _by_library(scheme, SETTINGS[scheme], seed=4)
    assert len(ours) == len(theirs) == DEVICES.get(scheme, 8) and all(
        np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True)
    )
    assert all(p.dtype == np.int64 for p in ours)


def test_natural_id_gives_one_owner_per_device_and_needs_the_fleet_to_match() -> None:
    parts = partition(LABELS, 40, "natural_id", seed=0, ids=OWNERS)
    assert sorted(int(OWNERS[p][0]) for p in parts) == list(range(40))
    assert all(np.all(OWNERS[p] == OWNERS[p][0]) for p in parts)
    assert sum(p.size for p in parts) == LABELS.size
    with pytest.raises(
        FedbenchError, match=r"gives 40 partitions but the fleet has 8.*fleet.scale=40"
    ):
        partition(LABELS, 8, "natural_id", seed=0, ids=OWNERS)
    with pytest.raises(FedbenchError, match="no natural owners"):
        partition(LABELS, 40, "natural_id", seed=0)


def test_iid_is_the_seeded_shuffle_cut_in_near_equal_parts() -> None:
    # The same draw as fedbench's own iid before Flower Datasets: digits results hold.
    old = np.array_split(np.random.default_rng(2).permutation(LABELS.size), 7)
    new = partition(LABELS, 7, "iid", seed=2)
    assert all(np.array_equal(np.sort(a), b) for a, b in zip(old, new, strict=True))
    assert max(p.size for p in new) - min(p.size for p in new) <= 1


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "shard"])
def test_seeded(scheme: str) -> None:
    a, b, c = (partition(LABELS, 8, scheme, seed=s, params=SETTINGS[scheme]) for s in (5, 5, 6))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_small_alpha_is_more_skewed() -> None:
    def skew(parts: list[np.ndarray]) -> float:
        overall = np.bincount(LABELS, minlength=10) / LABELS.size
        tv = [
            0.5 * np.abs(np.bincount(LABELS[p], minlength=10) / p.size - overall).sum()
            for p in parts
        ]
        return float(np.mean(tv))

    by_alpha = {
        a: skew(list(partition(LABELS, 10, "dirichlet", seed=3, params={"alpha": a})))
        for a in (0.1, 1.0, 100.0)
    }
    assert by_alpha[0.1] > by_alpha[1.0] > by_alpha[100.0]


@pytest.mark.parametrize(
    ("scheme", "params", "message"),
    [
        ("natural_idd", {}, r"unknown \(did you mean 'natural_id'\?\).*valid: continuous"),
        ("vertical_even", {}, "not offered, because it splits columns"),
        ("dirichlet", {}, "needs data.partition.alpha"),
        ("dirichlet", {"alpha": 0.5, "group_size": 2}, "group_size=2: not a parameter of scheme"),
        ("dirichlet", {"alpha": -1}, "scheme=dirichlet over 1000 examples and 8 devices: Alpha"),
        ("pathological", {"num_classes_per_partition": 2, "partition_by": "x"}, "columns label"),
    ],
)
def test_bad_settings_are_one_line(scheme: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(FedbenchError, match=message) as caught:
        partition(LABELS, 8, scheme, seed=0, params=params)
    assert "\n" not in str(caught.value)


def test_library_warnings_name_the_scheme() -> None:
    labels = np.repeat(np.arange(10), 10)
    with pytest.warns(UserWarning, match="data.partition.scheme=pathological: Classes"):
        partition(labels, 2, "pathological", seed=0, params={"num_classes_per_partition": 1})


def test_a_device_without_examples_is_refused() -> None:
    with pytest.raises(FedbenchError, match="2 of 10 devices get no examples.*device 4 first"):
        partition(
            np.arange(20) % 10,
            10,
            "dirichlet",
            seed=0,
            params={"alpha": 0.01, "min_partition_size": 0},
        )


def test_partitions_are_read_back_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    first = partition(LABELS, 8, "dirichlet", seed=7, params={"alpha": 0.3})
    monkeypatch.setattr(partitioners, "draw", lambda *a, **k: pytest.fail("drew again"))
    again = partition(LABELS, 8, "dirichlet", seed=7, params={"alpha": 0.3})
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))


def test_a_foreign_cache_file_is_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    name = partition_cache.key(LABELS, None, 8, "iid", {}, 11)
    bogus = [np.array([5_000], dtype=np.int64)] + [np.empty(0, np.int64)] * 7  # out of range
    partition_cache.store(name, bogus)
    parts = partition(LABELS, 8, "iid", seed=11)
    assert sum(p.size for p in parts) == LABELS.size


def test_sampled_partitions_serve_fleets_larger_than_the_pool() -> None:
    labels = np.arange(1000) % 10
    parts = partition(labels, 100_000, scheme=SAMPLED, seed=3, size=32)
    assert len(parts) == 100_000 and list(sizes(parts)[:3]) == [32, 32, 32]
    last = parts[99_999]
    assert last.dtype == np.int64 and len(set(last.tolist())) == 32  # no repeats in a device
    assert np.array_equal(last, partition(labels, 100_000, SAMPLED, seed=3, size=32)[99_999])
    assert not np.array_equal(parts[0], parts[1])  # devices differ
    with pytest.raises(FedbenchError, match=r"data.partition.size=None: the sampled scheme needs"):
        partition(labels, 10, scheme=SAMPLED, seed=3)
    with pytest.raises(FedbenchError, match=r"data.partition.size=4: the sampled scheme's"):
        partition(labels, 10, scheme="iid", seed=3, size=4)


@pytest.mark.parametrize("k", [0, -1, 1001])
def test_bad_partition_counts_point_at_sampled(k: int) -> None:
    with pytest.raises(FedbenchError, match=f"num_partitions={k}.*1000.*scheme=sampled"):
        partition(LABELS, k, "iid", seed=0)
