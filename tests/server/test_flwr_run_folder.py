"""A run `flwr run .` starts gets the folder `python -m fedbench` gives its runs.

Its ServerApp composes the experiment itself (empty `fedbench-config`), so
nobody else writes config.yaml, console.log or flower.log: before, the folder
held only what the server loop writes (rounds.csv, summary.json, ...).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from flwr.app import Context, RecordDict
from flwr.common.logger import FLOWER_LOGGER

from fedbench.experiment.codec import EXPERIMENT_KEY
from fedbench.experiment.schema import Experiment
from fedbench.report.progress import console
from fedbench.server import app as server_app

TOKEN = "abc123tok"


def _context(config: dict[str, Any]) -> Context:
    return Context(1, 0, {}, RecordDict(), {EXPERIMENT_KEY: "", **config})


def test_flwr_run_gets_config_console_and_flower_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Path] = []

    def fake_loop(grid: object, experiment: Experiment, run_dir: Path) -> None:
        console.line(f"round 1 of {experiment.scenario} (token={TOKEN})")
        FLOWER_LOGGER.log(logging.INFO, "flower says %s", TOKEN)
        seen.append(run_dir)

    monkeypatch.setattr(server_app, "run_server", fake_loop)
    monkeypatch.setattr("sys.orig_argv", ["flwr-serverapp", "--token", TOKEN])
    monkeypatch.chdir(tmp_path)  # flwr run's folder: outputs/flwr-run/<date>/<time> under it
    context = _context({server_app.OVERRIDES_KEY: "experiment=smoke"})
    server_app.make_server_app()(object(), context)  # type: ignore[arg-type]
    (run_dir,) = seen
    run_dir = tmp_path / run_dir
    assert run_dir.parts[-4:-2] == ("outputs", "flwr-run")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["scenario"]["days"] == 2  # experiment=smoke, as fedbench-overrides said
    log = (run_dir / "console.log").read_text()
    assert "round 1 of" in log and TOKEN not in log
    flower = (run_dir / "flower.log").read_text()
    assert "flower says" in flower and TOKEN not in flower
    assert not any(str(run_dir) in str(h) for h in FLOWER_LOGGER.handlers)  # handed back
