"""SIGKILL of a deployment's driver: nothing it started survives, and the folder resumes.

A two-day deployment run on two emulated devices is killed with SIGKILL
once day 1 is reported. Within 5 s no process it recorded is alive and
neither the public (proxy) port nor the SuperLink's own port listens.
`resume=<folder>` then continues it - as a deployment again, the folder's
runtime - to the end, and rounds.csv holds every round's rows exactly once.
"""

from __future__ import annotations

import csv
import json
import queue
import re
import signal
import socket
import time
import tomllib
from collections import Counter
from pathlib import Path

import psutil
import pytest

from tests.helpers import run_fedbench
from tests.runtime.test_deployment import serve

pytestmark = pytest.mark.slow

FLEET = "fleet.devices=[{profile:rpi4,count:1},{profile:pixel2,count:1}]"


def _alive(record: Path) -> list[str]:
    left = []
    for row in csv.DictReader(record.open()):
        try:
            p = psutil.Process(int(row["pid"]))
            same = abs(p.create_time() - float(row["create_time"])) < 0.01
            if same and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{row['pid']} {row['role']}")
        except psutil.Error:
            continue
    return left


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigkill_of_the_driver_leaves_nothing_and_the_folder_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    server, lines = serve(
        None,
        None,
        [],
        run_dir,
        "experiment=smoke",
        FLEET,
        "strategy.clients_per_round=2",
        "scenario.days=2",
        "scenario.pretrain.epochs=0",
    )
    public = None
    log: list[str] = []
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "".join(log[-30:])
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            log.append(line)
            if (m := re.search(r"Fleet API on https://127\.0\.0\.1:(\d+)", line)) is not None:
                public = int(m.group(1))
            if line.startswith("[fedbench] day 1:"):
                break
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        killed_at = time.monotonic()
    finally:
        if server.poll() is None:
            server.kill()
    assert public is not None
    address = tomllib.loads((run_dir / "flower" / "config.toml").read_text())
    internal = int(address["superlink"]["fedbench"]["address"].rsplit(":", 1)[1])
    record = run_dir / "logs" / "processes.csv"
    assert len(list(csv.DictReader(record.open()))) >= 6  # link, exec, proxy, nodes, apps
    while (_alive(record) or _listening(public) or _listening(internal)) and (
        time.monotonic() < killed_at + 5.0
    ):
        time.sleep(0.2)
    assert _alive(record) == [], "processes outlived the SIGKILLed driver"
    assert not _listening(public) and not _listening(internal)

    proc = run_fedbench([f"resume={run_dir}"], tmp_path / "resume-invocation", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime: fedbench.runtime.deployment.DeploymentRuntime" in proc.stdout
    assert "resuming after round 1" in proc.stdout or "starting over" in proc.stdout
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    assert Counter(r["round"] for r in rows) == {"1": 2, "2": 2}, rows
    assert len({(r["round"], r["device"]) for r in rows}) == 4  # never a row twice
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_day"] == 2
    assert _alive(record) == []
