"""On the command line: a run where every device fails exits non-zero, and holds its folder.

One simulation run in which every device drops out of every round: each round
says on the console that no device delivered an update, the summary ends
`failed` / `no_updates` and the exit code is 1. While it runs, a second run
into the same folder is refused naming the first one's PID; afterwards a
new run into the used folder is refused with `resume=` as the way on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow

ARGS = ["experiment=smoke", "scenario.days=2", "+fleet.faults={default:{dropout:1.0}}"]


def test_every_device_failing_fails_the_run_and_the_folder_is_held(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = subprocess.Popen(
        [sys.executable, "-m", "fedbench", *ARGS, f"hydra.run.dir={run_dir}"],
        stdout=subprocess.PIPE,  # the rounds' lines
        stderr=subprocess.PIPE,  # the failure
        text=True,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    try:
        lock = run_dir / "run.lock"
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text().strip()):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = run_fedbench(["experiment=smoke"], run_dir, timeout=120)
        assert first.poll() is None, "the first run ended before the second tried"
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"in use by another fedbench run (pid {first.pid}" in second.stderr
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 1, err[-3000:]
    assert "round 1: no device delivered an update (3 dropped: injected fault: dropout" in out
    assert "fedbench: run failed (no_updates): no round produced an update (2 round(s)" in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["failure"]) == ("failed", "no_updates")
    assert summary["rounds_without_update"] == [1, 2]

    again = run_fedbench(["experiment=smoke"], run_dir, timeout=120)
    assert again.returncode == 2
    assert (
        f"already holds a run (rounds.csv, checkpoint.pt); continue it with resume={run_dir}"
        in (again.stderr)
    )
