"""Fault injection: 30% of devices failing in various ways each round."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow

BASE = ["experiment=smoke", "fleet=mixed8", "scenario.days=3", "seed=2"]
# Five kinds of failure, 6% each: 30% of participations fail.
FAULTS = (
    "+fleet.faults={default:{dropout:0.06,crash:0.06,network_loss:0.06,"
    "nan_update:0.06,bad_update:0.06}}"
)


def test_faulty_fleet_completes_records_every_failure_and_keeps_accuracy(tmp_path: Path) -> None:
    faulty = tmp_path / "faulty"
    proc = run_fedbench([*BASE, "strategy.clients_per_round=8", FAULTS], faulty)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader((faulty / "rounds.csv").open()))
    assert len(rows) == 3 * 8
    statuses = Counter(r["status"] for r in rows)
    assert statuses["failed"] >= 2 and statuses["dropped"] >= 2, statuses
    failures = [r for r in rows if r["status"] != "ok"]
    assert 0.15 <= len(failures) / len(rows) <= 0.5  # ~30% drawn per participation
    assert all(r["reason"] for r in failures)  # every failure says why
    reasons = " ".join(r["reason"] for r in failures)
    for expected in ("InjectedCrash", "NaN/Inf", "dropout", "upload lost", "has shape"):
        assert expected in reasons, reasons
    summary = json.loads((faulty / "summary.json").read_text())
    assert summary["status"] == "completed"

    # The same rounds with fewer devices and no faults: bad updates were kept
    # out of the average, so the faulty fleet is not worse than that.
    fewer = tmp_path / "fewer"
    proc = run_fedbench([*BASE, "strategy.clients_per_round=5"], fewer)
    assert proc.returncode == 0, proc.stderr[-3000:]
    baseline = json.loads((fewer / "summary.json").read_text())
    assert summary["final_accuracy"] >= baseline["final_accuracy"] - 0.02
