"""No process of a simulation run's private Ray session outlives `python -m fedbench`.

Before, Ray's DashboardAgent, RuntimeEnvAgent and ClientAppActor workers were
still alive 5-10 s after the run had exited (rc 0 or interrupted): they notice
the raylet's death only by polling. The run's Ray processes are found while it
runs (its descendants, and any process whose command line names its `fbray-*`
folder); the moment it exits, none of them may be alive. Nor may its `fbray-*`
folder (which holds the run's Ray token) outlive it: the run removes it, or,
after a SIGKILL of the driver, its watchdog does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def _private_folder(procs: list[psutil.Process]) -> str | None:
    """fedbench's fbray-* folder, from a Ray process's command line."""
    for p in procs:
        for arg in _cmdline(p).split():
            if "/fbray-" in arg:
                head, _, tail = arg.partition("/fbray-")
                name = "fbray-" + tail.split("/", 1)[0]
                return head.split("=")[-1] + "/" + name
    return None


def _alive(procs: dict[tuple[int, float], psutil.Process]) -> list[str]:
    out = []
    for p in procs.values():
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {p.name()} {_cmdline(p)[:120]}")
        except psutil.Error:
            continue
    return out


def _run_and_watch(
    tmp_path: Path, args: list[str], stop: signal.Signals | None, settle_s: float = 0.0
) -> tuple[list[str], str]:
    """Start a run, note its Ray processes till it exits; those still alive right after
    (or `settle_s` later), and its fbray-* folder."""
    run_dir = tmp_path / "run"
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedbench", "experiment=smoke", *args, f"hydra.run.dir={run_dir}"],
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    seen: dict[tuple[int, float], psutil.Process] = {}
    names: set[str] = set()
    folder: str | None = None
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None:
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            tree = _tree(proc.pid)[1:]
            folder = folder or _private_folder(tree)
            if folder is not None:
                tree += [p for p in psutil.process_iter() if folder in _cmdline(p)]
            for p in tree:
                try:
                    if (p.pid, p.create_time()) not in seen:
                        seen[(p.pid, p.create_time())] = p
                        names.add(p.name())
                except psutil.Error:
                    continue
            if stop is not None and any("ClientAppActor" in _cmdline(p) for p in tree):
                proc.send_signal(stop)
                stop = None
            time.sleep(0.1)
        end = time.monotonic() + settle_s
        while (_alive(seen) or os.path.lexists(folder or "")) and time.monotonic() < end:
            time.sleep(0.1)
        left = _alive(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in seen.values():  # the test's own mess, should it fail
            with contextlib.suppress(psutil.Error):
                p.kill()
    assert folder is not None and {"raylet", "gcs_server"} <= names, names
    return left, folder


def test_no_ray_process_outlives_a_finished_run(tmp_path: Path) -> None:
    left, folder = _run_and_watch(tmp_path, [], None)
    assert left == []
    assert not os.path.lexists(folder)


def test_no_ray_process_outlives_an_interrupted_run(tmp_path: Path) -> None:
    left, folder = _run_and_watch(tmp_path, ["scenario.days=30"], signal.SIGTERM)
    assert left == []
    assert not os.path.lexists(folder)


def test_a_killed_drivers_ray_processes_end_within_seconds(tmp_path: Path) -> None:
    """SIGKILL: nothing in the driver runs; its watchdog ends the session's processes
    and then removes its fbray-* folder, token file and all."""
    left, folder = _run_and_watch(tmp_path, ["scenario.days=30"], signal.SIGKILL, settle_s=5.0)
    assert left == []
    assert not os.path.lexists(folder), os.listdir(folder)
