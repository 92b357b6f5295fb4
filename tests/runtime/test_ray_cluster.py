"""runtime.ray_address: the same experiment on an existing two-node Ray cluster.

Starts a head node on 127.0.0.1 with `ray start --head` and a second node with
`ray start --address` (one CPU each, as two machines would be), runs a tiny
experiment against the cluster, checks that devices trained on workers of both
nodes, and stops exactly the processes of that cluster.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_cluster(temp_dir: str) -> None:
    """End the head node's processes, found by PID through their private temp dir."""
    ours = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if any(temp_dir in part for part in proc.info["cmdline"] or []):
            ours.append(proc)
    for proc in ours:
        proc.terminate()
    _, alive = psutil.wait_procs(ours, timeout=15)
    for proc in alive:
        proc.kill()


def test_runs_on_an_existing_ray_cluster(tmp_path: Path) -> None:
    ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="fbhead-")  # short: Ray's socket paths are limited
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
    start = subprocess.run(
        [
            ray_bin,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    try:
        assert start.returncode == 0, start.stderr[-2000:]
        second = subprocess.run(
            [
                ray_bin,
                "start",
                f"--address=127.0.0.1:{port}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=1",
                "--disable-usage-stats",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert second.returncode == 0, second.stderr[-2000:]
        run_dir = tmp_path / "run"
        proc = run_fedbench(
            ["experiment=smoke", "scenario.days=3", f"runtime.ray_address=127.0.0.1:{port}"],
            run_dir,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "completed"
        assert summary["totals"]["status_counts"]["ok"] == 9
        rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
        ray_nodes = {r["worker"].rsplit("@", 1)[-1] for r in rows}
        assert len(ray_nodes) == 2, [r["worker"] for r in rows]  # workers on both nodes
    finally:
        _stop_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    leftover = [
        p
        for p in psutil.process_iter(["cmdline"])
        if any(temp_dir in c for c in p.info["cmdline"] or [])
    ]
    assert not leftover
