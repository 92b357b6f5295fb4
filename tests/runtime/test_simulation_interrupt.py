"""Ctrl-C and SIGTERM end a simulation run between rounds, its folder written (no hang).

Flower runs the ServerApp on a thread of its own and Ray's fleet on the main
thread, where the signal lands: before fedbench.core.interrupt, Ctrl-C left the
rounds going (the process never exited) and SIGTERM met Ray's handler, which
aborted the process with summary.json still saying "running".
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_run_as_interrupted_with_what_it_measured(
    signum: signal.Signals, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    proc = _start_and_wait_for_round_2(run_dir, tmp_path / "out.txt")
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signum)
        rc = proc.wait(timeout=120)  # the hang this test is for: no exit at all
    finally:
        if proc.poll() is None:
            proc.kill()
    out = _text(tmp_path / "out.txt")
    assert rc == 130, out[-3000:]  # the shell's code for Ctrl-C, as runtime=deployment's
    assert f"run interrupted (interrupted): RunInterrupted: {signum.name} received" in out
    assert "Traceback" not in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    rounds = {int(r["round"]) for r in csv.DictReader((run_dir / "rounds.csv").open())}
    assert {1, 2} <= rounds and max(rounds) < 200
    assert (run_dir / "figures" / "accuracy.png").exists()
    _, alive = psutil.wait_procs(tree, timeout=30)  # Ray's processes went with the run
    assert not alive, [p.pid for p in alive]


def test_a_second_ctrl_c_stops_at_once_and_takes_rays_processes_along(tmp_path: Path) -> None:
    """Ctrl-C twice: the first asks, the second (while the run is still ending) exits now.

    Before, the second was a KeyboardInterrupt on the main thread, inside Flower's
    fleet loop: the run wrote its folder, then the process hung at exit joining the
    fleet's threads (blocked in ray.get) and never returned.
    """
    run_dir = tmp_path / "run"
    proc = _start_and_wait_for_round_2(run_dir, tmp_path / "out.txt")
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)  # the first is handled (two pending SIGINTs would be one)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = _text(tmp_path / "out.txt")
    assert rc == 130, out[-3000:]
    assert "second SIGINT: stopping at once" in out, out[-3000:]
    rounds = {int(r["round"]) for r in csv.DictReader((run_dir / "rounds.csv").open())}
    assert {1, 2} <= rounds  # what the rounds measured stays
    _, alive = psutil.wait_procs(tree, timeout=30)  # Ray's agents too: nothing outlives it
    assert not alive, [(p.pid, p.name()) for p in alive]


def _start_and_wait_for_round_2(run_dir: Path, out: Path) -> subprocess.Popen[bytes]:
    """`experiment=study_rounds` for 200 rounds, once its round 2 is in console.log."""
    cmd = [sys.executable, "-m", "fedbench", "experiment=study_rounds", "scenario.rounds=200"]
    proc = subprocess.Popen(
        [*cmd, f"hydra.run.dir={run_dir}"],
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
        # As a terminal's Ctrl-C finds it: SIGINT not ignored, whatever started pytest.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while "round 2:" not in _text(run_dir / "console.log"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(_text(out))
        time.sleep(0.5)
    return proc


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_a_second_sigterm_right_after_the_first_still_writes_the_ending_and_resumes(
    tmp_path: Path,
) -> None:
    """SIGTERM twice within 10 ms: the second no longer ends the process before the run's
    ending is written (summary.json said `running`); it waits for it, skips the figures.

    The folder then has its summary (`interrupted`), its checkpoint, no Ray process or
    temp folder left, and `resume=` completes it, every (round, device) row once.
    """
    run_dir = tmp_path / "run"
    out = tmp_path / "out.txt"
    cmd = [sys.executable, "-m", "fedbench", "experiment=smoke", "scenario.days=5"]
    proc = subprocess.Popen(
        [*cmd, f"hydra.run.dir={run_dir}"],
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    try:
        deadline = time.monotonic() + 300
        while "day 1:" not in _text(run_dir / "console.log"):
            assert proc.poll() is None and time.monotonic() < deadline, _text(out)[-3000:]
            time.sleep(0.2)
        tree = psutil.Process(proc.pid).children(recursive=True)
        temp = {a for p in tree for a in _cmdline(p) if a.startswith("--temp-dir=")}
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        second = time.monotonic()
        rc = proc.wait(timeout=60)
        took = time.monotonic() - second
    finally:
        if proc.poll() is None:
            proc.kill()
    text = _text(out)
    assert rc == 130, text[-3000:]
    assert "Traceback" not in text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted", (summary["status"], text[-2000:])
    assert (run_dir / "checkpoint.pt").is_file()
    assert took < 30, took  # quick: no figures, no Ray shutdown
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive]
    assert len(temp) == 1
    assert not Path(temp.pop().split("=", 1)[1]).parent.exists()  # the fbray-* folder

    proc2 = run_fedbench([f"resume={run_dir}"], tmp_path / "resume-invocation")
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert "resuming after round" in proc2.stdout
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    assert Counter(r["round"] for r in rows) == {str(n): 3 for n in range(1, 6)}, rows
    assert len({(r["round"], r["device"]) for r in rows}) == len(rows)  # never a row twice
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_day"] == 5


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return " ".join(p.cmdline()).split()
    except psutil.Error:
        return []
