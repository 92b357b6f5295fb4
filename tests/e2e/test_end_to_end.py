"""A whole run through Flower's simulation engine: 2 days x 3 devices, tiny model."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from fedbench.report.provenance import COMMAND_ENV
from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow
TOKEN = "abc123tok"
ENV_SECRET = "envsecret9"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("e2e") / "run"
    # The command as `flwr run .` hands it over, with Flower's --token (see test_no_secret_...)
    env = {COMMAND_ENV: f"flwr run . --token {TOKEN}", "FLWR_API_TOKEN": ENV_SECRET}
    proc = run_fedbench(["experiment=smoke"], run_dir, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, proc.stdout + proc.stderr


def test_run_folder_is_self_describing(smoke_run: tuple[Path, str]) -> None:
    run_dir, _ = smoke_run
    for name in (
        "config.yaml",
        "rounds.csv",
        "summary.json",
        "rounds_summary.csv",
        "figures/accuracy.png",
        "figures/accuracy.pdf",
        "console.log",
        "flower.log",
    ):
        assert (run_dir / name).is_file(), name
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["scenario"]["days"] == 2 and config["model"]["name"] == "small_cnn"


def test_no_secret_reaches_any_file_of_the_run_folder(smoke_run: tuple[Path, str]) -> None:
    """Results folders get shared: the command's --token is masked in summary.json."""
    run_dir, _ = smoke_run
    for path in run_dir.rglob("*"):
        if path.is_file():
            body = path.read_bytes()
            assert TOKEN.encode() not in body and ENV_SECRET.encode() not in body, path
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["provenance"]["command"] == "flwr run . --token REDACTED"


def test_every_device_reports_every_round(smoke_run: tuple[Path, str]) -> None:
    run_dir, _ = smoke_run
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    assert len(rows) == 2 * 3  # 2 days x 3 devices, all picked
    assert {r["device"] for r in rows} == {"host-000", "host-001", "host-002"}
    assert {r["status"] for r in rows} == {"ok"}
    assert all(int(r["num_examples"]) == 32 for r in rows)  # new_samples_per_day
    assert all(float(r["host_wall_s"]) > 0 and float(r["train_loss"]) > 0 for r in rows)
    assert [int(r["day"]) for r in rows] == [1, 1, 1, 2, 2, 2]


def test_summary_has_day0_and_every_day(smoke_run: tuple[Path, str]) -> None:
    run_dir, output = smoke_run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert list(summary["accuracy_per_day"]) == ["0", "1", "2"]
    assert summary["final_day"] == 2
    assert summary["totals"]["status_counts"]["ok"] == 6
    # Real training: the pretrained tiny CNN is far above chance (10%) on digits.
    assert summary["day0_accuracy"] > 0.5 and summary["final_accuracy"] > 0.5
    assert "day 0: accuracy" in output and "day 2: accuracy" in output
    # The console carries fedbench's lines, not Flower's/Ray's log flood.
    assert "INFO" not in output
