"""config.yaml of an app= run says the app used its own data and model, and reads back."""

from __future__ import annotations

from dataclasses import replace

import yaml

from fedbench.experiment.app import AppConfig
from fedbench.experiment.compose import compose_experiment
from fedbench.experiment.config_file import config_yaml
from fedbench.experiment.schema import Experiment


def test_an_app_runs_config_says_data_and_model_were_not_its_own() -> None:
    """It listed `data: digits` / `model: small_cnn` as if the app had trained on them."""
    own = compose_experiment(["experiment=smoke"])
    app = AppConfig(root="/apps/qs", clientapp="task:app", name="quickstart-pytorch")
    text = config_yaml(replace(own, app=app))
    header = text.split("\n", 3)[:3]
    assert "quickstart-pytorch" in header[0] and "did not train on" in header[1]
    back = Experiment.from_config(yaml.safe_load(text))  # resume= reads it as before
    assert back.app is not None and (back.app.name, back.app.root) == (app.name, app.root)
    assert back.model.name == own.model.name
    assert not config_yaml(own).startswith("#")  # fedbench's own app: no header


def test_a_secret_in_the_apps_run_config_is_masked() -> None:
    app = AppConfig(root="/apps/qs", clientapp="task:app", run_config={"api-key": "sk-12345"})
    text = config_yaml(replace(compose_experiment(["experiment=smoke"]), app=app))
    assert "sk-12345" not in text and "api-key: REDACTED" in text
