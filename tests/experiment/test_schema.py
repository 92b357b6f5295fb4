"""The typed experiment: built once, validated before anything starts, one serialised form."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from fedbench.errors import FedbenchError
from fedbench.experiment.app import load_app
from fedbench.experiment.codec import from_json, to_json
from fedbench.experiment.schema import Experiment, TrainConfig
from fedbench.experiment.typed import parse
from fedbench.preflight import preflight
from tests.bad_inputs import _typed

APP = Path(__file__).parents[1] / "apps" / "quickstart"


def test_the_wire_form_reads_back_to_the_same_experiment() -> None:
    experiment = _typed(["experiment=daily_densenet", "algorithm=fedprox", "round_close=first_k"])
    again = from_json(to_json(experiment))  # type: ignore[arg-type]
    assert again.to_config() == experiment.to_config()  # type: ignore[attr-defined]
    assert isinstance(again.train, TrainConfig) and again.train.batch_size == 16
    # config.yaml is the same form: a run folder's config is an experiment.
    text = yaml.safe_dump(experiment.to_config())  # type: ignore[attr-defined]
    assert Experiment.from_config(yaml.safe_load(text)).to_config() == again.to_config()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"lr": float("inf")}, "train.lr must be a finite number"),
        ({"lr": 0}, "train.lr=0.0: must be > 0 and <= 1,000"),
        ({"batch_size": True}, "train.batch_size must be an integer"),
        ({"momentum": 1.0}, "train.momentum=1.0: must be >= 0 and < 1"),
        ({"weight_decay": -1.0}, "train.weight_decay=-1.0: must be >= 0 and <= 1"),
        ({"batch_sise": 8}, "train.batch_sise: unknown key (did you mean 'batch_size'?)"),
    ],
)
def test_train_values_are_checked_with_their_key(values: dict, message: str) -> None:
    with pytest.raises(FedbenchError) as error:
        parse(TrainConfig, values, "train")
    assert message in str(error.value)


def test_a_typo_in_a_targets_argument_names_the_closest_one() -> None:
    with pytest.raises(
        FedbenchError,
        match=r"strategy.exploraton: not an argument of Oort \(did you mean 'exploration'\?\)",
    ):
        _typed(["strategy=oort", "+strategy.exploraton=0.5"])
    with pytest.raises(FedbenchError, match=r"round_close.k must be an integer"):
        _typed(["round_close=first_k", "round_close.k=three"])


def test_a_client_may_not_take_more_cpus_than_the_host_has() -> None:
    too_many = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 64) + 1
    experiment = _typed([f"runtime.client_cpus={too_many}"])
    with pytest.raises(FedbenchError, match=f"runtime.client_cpus={too_many}: this host has"):
        preflight(experiment)  # type: ignore[arg-type]


def test_an_app_is_read_from_its_pyproject_and_its_run_config_overridden() -> None:
    app = load_app(str(APP), {"lr": 0.5})
    assert app.clientapp == "quickstart_app.client_app:app"
    assert app.serverapp == "quickstart_app.server_app:app"
    assert app.run_config["lr"] == 0.5 and app.run_config["num-server-rounds"] == 3
    with pytest.raises(FedbenchError, match="app_run_config.lrr: .*did you mean 'lr'"):
        load_app(str(APP), {"lrr": 0.5})
    sys.path.insert(0, str(APP))
    try:
        assert load_app("quickstart_app", {}).root == str(APP.resolve())  # a module finds its app
    finally:
        sys.path.remove(str(APP))


def test_the_app_brings_its_own_strategy_unless_algorithm_is_given() -> None:
    assert _typed([f"app={APP}"]).app.own_strategy  # type: ignore[attr-defined]
    assert not _typed([f"app={APP}", "algorithm=fedprox"]).app.own_strategy  # type: ignore[attr-defined]
