"""`mode=fedbuff` as a user runs it: the same records twice in simulation, wall time in deployment.

In simulation every figure of an emulated device is a function of the seed
and the workload, and FedBuff orders arrivals on the virtual clock, so two
runs agree row for row (but for the host's pids and node ids). In
deployment a physical device joins, and the server aggregates whenever a
buffer's worth of replies has arrived on the host's clock.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from fedbench.security import issue_node_key
from tests.helpers import run_fedbench
from tests.runtime.test_deployment import _device, _stop, follow, serve

pytestmark = pytest.mark.slow

HOST_DEPENDENT = ("node", "host_wall_s", "worker")
ARGS = [
    "experiment=study_rounds",
    "mode=fedbuff",
    "mode.buffer_size=3",
    "scenario.rounds=3",
    "strategy.clients_per_round=4",
    "seed=11",
]


def _rows(run_dir: Path) -> list[dict[str, str]]:
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    return [{k: v for k, v in r.items() if k not in HOST_DEPENDENT} for r in rows]


def test_fedbuff_simulation_gives_the_same_records_twice(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for run_dir in (first, second):
        proc = run_fedbench(ARGS, run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _rows(first)
    assert rows == _rows(second)
    summaries = [json.loads((d / "summary.json").read_text()) for d in (first, second)]
    assert summaries[0]["async"] == summaries[1]["async"]
    info = summaries[0]["async"]
    assert info["mode"] == "fedbuff" and info["updates_applied"] == 9  # 3 buffers of 3
    # Devices overlap in time: some update started before the model it returned to moved on.
    assert max(int(r["staleness"]) for r in rows) >= 1
    assert all(float(r["end_s"]) >= float(r["start_s"]) for r in rows)
    server = list(csv.DictReader((first / "server_rounds.csv").open()))
    assert [r["close"] for r in server] == ["fedbuff"] * 3
    assert [int(r["model_version"]) for r in server] == [1, 2, 3]


def test_fedbuff_in_deployment_aggregates_on_wall_time(tmp_path: Path) -> None:
    key = issue_node_key(tmp_path / "keys", "probe-host")
    run_dir = tmp_path / "run"
    server, lines = serve(
        None,
        None,
        [key.public_key],
        run_dir,
        "experiment=study_rounds",
        "mode=fedbuff",
        "mode.buffer_size=2",
        "scenario.rounds=2",
        "scenario.eval_every=2",
        "strategy.clients_per_round=3",
        "fleet.devices=[{profile:rpi4,count:1},{profile:pixel2,count:1},{profile:physical,count:1}]",
    )
    device = None

    def join(line: str) -> None:
        nonlocal device
        if "waiting for 1 physical device" in line and device is None:
            ca = run_dir / "credentials" / "ca.pem"
            port = re.search(r"superlink=<this host>:(\d+)", line)
            assert port is not None, line
            device = _device(f"127.0.0.1:{port.group(1)}", ca, key.private_key, "probe-host")

    try:
        follow(server, lines, join, timeout_s=420)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "completed"
        assert summary["async"]["mode"] == "fedbuff"
        assert summary["async"]["updates_applied"] == 4  # 2 buffers of 2
        rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
        assert {r["kind"] for r in rows} >= {"emulated"}
        assert sum(r["status"] == "ok" for r in rows) >= 4
        server_rows = list(csv.DictReader((run_dir / "server_rounds.csv").open()))
        assert [r["close"] for r in server_rows] == ["fedbuff", "fedbuff"]
    finally:
        for proc in (server, device):
            _stop(proc)
