"""SIGTERM twice during a deployment: interrupted, its folder written, nothing left, resumable.

Before, the first SIGTERM started the stop (every process terminated, a 5 s
grace) and the second met SIGTERM's default action there: the driver died
with rc 143, printed no `interrupted` line, and the ServerApp, killed with it,
left summary.json saying `running`. Now the second only hurries the stop: it
waits for the ServerApp to write the run's ending, then kills what is left.
"""

from __future__ import annotations

import contextlib
import csv
import json
import queue
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import run_fedbench
from tests.runtime.test_deployment import serve
from tests.runtime.test_deployment_kill import _alive

pytestmark = pytest.mark.slow


def test_sigterm_twice_ends_a_deployment_interrupted_and_it_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    server, lines = serve(
        None,
        None,
        [],
        run_dir,
        "experiment=smoke",
        "scenario.days=2",
        "scenario.pretrain.epochs=0",
    )
    log: list[str] = []
    try:
        deadline = time.monotonic() + 300
        while not any(line.startswith("[fedbench] day 1:") for line in log):
            assert server.poll() is None and time.monotonic() < deadline, "".join(log[-30:])
            with contextlib.suppress(queue.Empty):
                log.append(lines.get(timeout=0.5))
        server.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # the first is handled: the stop has begun
        server.send_signal(signal.SIGTERM)
        second = time.monotonic()
        server.wait(timeout=120)
        took = time.monotonic() - second
        while True:
            try:
                log.append(lines.get(timeout=0.5))
            except queue.Empty:
                break
    finally:
        if server.poll() is None:
            server.kill()
    text = "".join(log)
    assert server.returncode == 130, text[-3000:]  # not 143: the driver ended itself
    assert "deployment: interrupted; stopped the" in text, text[-3000:]
    assert "SIGTERM while stopping" in text
    assert "Traceback" not in text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted", summary["status"]
    assert summary["final_day"] == 1
    assert (run_dir / "checkpoint.pt").is_file()
    assert took < 30, took  # quick: the stop's 5 s grace at most, then the watchdog
    record = run_dir / "logs" / "processes.csv"
    assert len(list(csv.DictReader(record.open()))) >= 6  # link, exec, proxy, nodes, apps
    assert _alive(record) == []

    proc = run_fedbench([f"resume={run_dir}"], tmp_path / "resume-invocation", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime: fedbench.runtime.deployment.DeploymentRuntime" in proc.stdout
    assert "resuming after round 1" in proc.stdout
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    assert Counter(r["round"] for r in rows) == {"1": 3, "2": 3}, rows
    assert len({(r["round"], r["device"]) for r in rows}) == len(rows)  # never a row twice
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_day"] == 2
    assert _alive(record) == []
