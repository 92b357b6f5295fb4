"""Every config in fedbench/conf/ composes, resolves and builds (lightning-hydra-template style)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from fedbench.errors import FedbenchError
from fedbench.experiment.build import build_algorithm
from fedbench.experiment.codec import from_json, to_json
from fedbench.experiment.compose import REQUIRED_GROUPS, experiment_from, resolve
from fedbench.experiment.schema import Experiment
from fedbench.paths import conf_dir
from fedbench.runtime.base import build_runtime
from fedbench.scenarios.base import build_scenario
from fedbench.server.close.base import build_close
from strategies.base import build_selector

GROUPS = REQUIRED_GROUPS
EXPERIMENTS = sorted(p.stem for p in (conf_dir() / "experiment").glob("*.yaml"))


@contextmanager
def hydra_ctx() -> Iterator[None]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        yield


def composed(overrides: list[str]) -> DictConfig:
    with hydra_ctx():
        return compose(config_name="config", overrides=overrides)


def test_every_yaml_opens_with_the_command_that_runs_it() -> None:
    for path in conf_dir().rglob("*.yaml"):
        lines = path.read_text().splitlines()
        head = [line for line in lines[:3] if line.startswith("# python -m fedbench")]
        assert head, f"{path} does not open with '# python -m fedbench ...'"


def typed(overrides: list[str]) -> Experiment:
    return experiment_from(resolve(composed(overrides)), overrides)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_validates_and_builds(name: str) -> None:
    experiment = typed([f"experiment={name}"])
    # One serialised form, read back to the same experiment.
    assert from_json(to_json(experiment)).to_config() == experiment.to_config()
    for build in (build_selector, build_algorithm, build_close, build_scenario, build_runtime):
        build(experiment)


@pytest.mark.parametrize(
    ("group", "option"),
    [(g, p.stem) for g in GROUPS for p in sorted((conf_dir() / g).glob("*.yaml"))],
)
def test_every_group_option_composes_and_validates(group: str, option: str) -> None:
    experiment = typed([f"{group}={option}", *REQUIRED.get(f"{group}={option}", [])])
    assert getattr(experiment, group) is not None


# Options with keys a user must give (`???` in their YAML).
REQUIRED = {"data=hf": ["data.name=some/set", "data.num_classes=3"]}


def test_an_option_without_its_required_keys_names_them() -> None:
    with pytest.raises(FedbenchError, match="data.num_classes"):
        typed(["data=hf", "data.name=some/set"])


def test_daily_densenet_overrides_the_defaults() -> None:
    experiment = typed(["experiment=daily_densenet"])
    assert experiment.model.name == "densenet40"
    assert experiment.scenario.params["days"] == 17
    assert experiment.scenario.params["new_samples_per_day"] == 64


def test_conf_dir_is_the_repository_conf() -> None:
    assert (conf_dir() / "config.yaml").is_file()
    assert Path(conf_dir()).name == "conf"


def test_the_hooks_keep_their_order_across_the_wire() -> None:
    """A deployment's ServerApp gets the experiment as JSON: the records must still be
    written before the checkpoint that vouches for them is saved."""
    from fedbench.server.hooks import CheckpointHook, RecordHook, build_hooks

    experiment = typed([])
    names = list(experiment.hooks.entries)
    assert names.index("records") < names.index("checkpoint")
    received = from_json(to_json(experiment))
    assert list(received.hooks.entries) == names
    kinds = [type(h) for h in build_hooks(received)]
    assert kinds.index(RecordHook) < kinds.index(CheckpointHook)
