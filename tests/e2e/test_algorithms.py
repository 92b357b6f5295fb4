"""Flower's strategies as `algorithm=`, composed with fedbench's selection, in real runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow


def test_fedprox_fedadam_and_fedmedian_runs_complete(tmp_path: Path) -> None:
    """One multirun (one Hydra process, one job per algorithm), 2 days x 3 devices each."""
    sweep = tmp_path / "sweep"
    proc = run_fedbench(
        [
            "-m",
            "experiment=smoke",
            "algorithm=fedprox,fedadam,fedmedian",
            "scenario.pretrain.epochs=1",
            f"hydra.sweep.dir={sweep}",
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for job, target in enumerate(("FedProx", "FedAdam", "FedMedian")):
        folder = sweep / str(job)
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["status"] == "completed", summary["error"]
        config = (folder / "config.yaml").read_text()
        assert f"flwr.serverapp.strategy.{target}" in config
        rows = list(csv.DictReader((folder / "server_rounds.csv").open()))
        assert [int(r["aggregated"]) for r in rows] == [3, 3]
        assert [int(r["model_version"]) for r in rows] == [1, 2]
