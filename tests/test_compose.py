"""Every config in conf/ composes, resolves and builds (lightning-hydra-template style)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from fedbench.config import from_flower, resolve, to_flower
from fedbench.paths import conf_dir
from fedbench.preflight import build

GROUPS = ("data", "model", "fleet", "strategy", "scenario", "train", "runtime", "report")
EXPERIMENTS = sorted(p.stem for p in (conf_dir() / "experiment").glob("*.yaml"))


@contextmanager
def hydra_ctx() -> Iterator[None]:
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="fedbench.conf", version_base=None):
        yield


def composed(overrides: list[str]) -> DictConfig:
    with hydra_ctx():
        return compose(config_name="config", overrides=overrides)


def test_every_yaml_opens_with_the_command_that_runs_it() -> None:
    for path in conf_dir().rglob("*.yaml"):
        lines = path.read_text().splitlines()
        head = [line for line in lines[:3] if line.startswith("# python -m fedbench")]
        assert head, f"{path} does not open with '# python -m fedbench ...'"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_and_builds(name: str) -> None:
    cfg = composed([f"experiment={name}"])
    experiment = resolve(cfg)
    assert from_flower(to_flower(experiment)) == experiment
    for group in ("strategy", "scenario", "runtime"):
        build(group, experiment[group])


@pytest.mark.parametrize(
    ("group", "option"),
    [(g, p.stem) for g in GROUPS for p in sorted((conf_dir() / g).glob("*.yaml"))],
)
def test_every_group_option_composes(group: str, option: str) -> None:
    experiment = resolve(composed([f"{group}={option}"]))
    assert experiment[group]


def test_daily_densenet_overrides_the_defaults() -> None:
    experiment = resolve(composed(["experiment=daily_densenet"]))
    assert experiment["model"]["name"] == "densenet40"
    assert experiment["scenario"]["days"] == 17
    assert experiment["scenario"]["new_samples_per_day"] == 64


def test_conf_dir_is_the_repository_conf() -> None:
    assert (conf_dir() / "config.yaml").is_file()
    assert Path(conf_dir()).name == "conf"
