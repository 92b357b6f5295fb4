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


@pytest.mark.parametrize("algorithm", ["fjord", "fedrolex"])
def test_submodel_algorithms_run_with_rates_from_the_deadline(
    algorithm: str, tmp_path: Path
) -> None:
    """On emulated devices, each device its own width, every update averaged.

    At a 0.25 s deadline the round-1 Raspberry Pi 3B+ (0.32 s at rate 1) gets a
    narrower model than the phone and the Pi 5 beside it.
    """
    folder = tmp_path / algorithm
    proc = run_fedbench(
        [
            "experiment=smoke",
            "fleet=edge_mixed",
            f"algorithm={algorithm}",
            "algorithm.rate_policy=deadline",
            "round_close=deadline",
            "round_close.deadline_s=0.25",
        ],
        folder,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "completed", summary["error"]
    rows = list(csv.DictReader((folder / "rounds.csv").open()))
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    rates = {float(r["model_rate"]) for r in rows}
    assert len(rates) > 1 and rates <= {1.0, 0.5, 0.25, 0.125, 0.0625}
    # The cost columns are each submodel's: a narrower one peaks lower.
    peak = {float(r["model_rate"]): float(r["peak_mem_mb"]) for r in rows}
    assert peak[min(peak)] < peak[max(peak)]
    server = list(csv.DictReader((folder / "server_rounds.csv").open()))
    assert [int(r["aggregated"]) for r in server] == [3, 3]
    assert set(summary["final_accuracy_per_rate"]) == {"1", "0.5", "0.25", "0.125", "0.0625"}


def test_heterofl_in_deployment_on_loopback(tmp_path: Path) -> None:
    """The same algorithm over a real SuperLink and one SuperNode per device (issue 29).

    Each device's rate travels in its train message and its submodel comes back
    sliced: at a 0.25 s deadline the Raspberry Pi 3B+ of day 1 trains 1/2, the
    TX2 and the Pi 4 beside it the whole model, and every update is aggregated.
    The fleet is those three devices of fleet=mixed8 (the ones its day 1 picks),
    so the deployment starts three SuperNodes, not eight.
    """
    folder = tmp_path / "heterofl"
    proc = run_fedbench(
        [
            "runtime=deployment",
            "experiment=smoke",
            "fleet.devices=[{profile:rpi3bplus,count:1},{profile:jetson_tx2,count:1},"
            "{profile:rpi4,count:1}]",
            "algorithm=heterofl",
            "algorithm.rate_policy=deadline",
            "round_close=deadline",
            "round_close.deadline_s=0.25",
        ],
        folder,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "completed", summary["error"]
    rows = list(csv.DictReader((folder / "rounds.csv").open()))
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    rates = {r["device"]: float(r["model_rate"]) for r in rows if r["day"] == "1"}
    assert rates["rpi3bplus-000"] == 0.5 and max(rates.values()) == 1.0, rates
    assert rates["jetson_tx2-000"] == rates["rpi4-000"] == 1.0, rates
    server = list(csv.DictReader((folder / "server_rounds.csv").open()))
    assert [int(r["aggregated"]) for r in server] == [3, 3]
    assert set(summary["final_accuracy_per_rate"]) == {"1", "0.5", "0.25", "0.125", "0.0625"}
