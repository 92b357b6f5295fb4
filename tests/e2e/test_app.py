"""A third-party Flower app (tests/apps/quickstart) run under fedbench on a mixed fleet."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow

APP = Path(__file__).parents[1] / "apps" / "quickstart"


def test_any_flower_app_runs_on_an_emulated_fleet(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_fedbench(
        [
            f"app={APP}",
            "fleet=mixed8",
            "strategy=oort",
            "strategy.clients_per_round=4",
            "scenario=rounds",
            "scenario.rounds=2",
        ],
        run,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader((run / "rounds.csv").open()))
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    assert {r["kind"] for r in rows} == {"emulated"}
    for r in rows:  # the app's own training, emulated on each device's profile
        assert float(r["latency_s"]) > 0 and float(r["energy_j"]) > 0
        assert 0 < float(r["peak_mem_mb"]) < float(r["mem_budget_mb"])
        assert int(r["num_examples"]) > 100 and r["plan"].startswith("app:")
    slowest = max(rows, key=lambda r: float(r["round_trip_s"]))
    assert slowest["profile"] in ("rpi3bplus", "rpi4", "honor8", "jetson_nano")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    # The app evaluates on the clients (its FedAvg's federated evaluation): eval_acc.
    assert summary["final_accuracy"] > 0.2
    assert "app: quickstart_app.client_app:app" in proc.stdout
