"""A running simulation's Ray session, seen from outside: its processes, sockets and folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil


def name_of(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


def command_line(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""  # ended meanwhile


def wait_for_actors(
    proc: subprocess.Popen[bytes], out: Path, timeout: float = 300
) -> list[psutil.Process]:
    """The run's process tree once a ClientAppActor trains: every kind of Ray process is up."""
    deadline = time.monotonic() + timeout
    tree: list[psutil.Process] = []
    while not any("ClientAppActor" in name_of(p) for p in tree):
        assert proc.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
        time.sleep(0.5)
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    return tree


def listening(procs: list[psutil.Process]) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening TCP socket of `procs`."""
    out = []
    for p in procs:
        try:
            name = p.name()
            conns = p.net_connections(kind="inet")
        except psutil.Error:
            continue  # ended meanwhile
        out += [(name, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def ray_folder(procs: list[psutil.Process]) -> Path:
    """Ray's temp dir, from the raylet's command line (`--temp-dir=...`, in its worker command)."""
    for p in procs:
        try:
            if p.name() != "raylet":
                continue
            for arg in " ".join(p.cmdline()).split():
                if arg.startswith("--temp-dir="):
                    return Path(arg.split("=", 1)[1])
        except psutil.Error:
            continue
    raise AssertionError("no raylet with a --temp-dir among the run's processes")


def start_smoke(tmp_path: Path, days: int) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """A smoke run of `days` days in the background: (its process, its folder, its output)."""
    run_dir = tmp_path / "run"
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedbench", "experiment=smoke", f"scenario.days={days}"]
        + [f"hydra.run.dir={run_dir}"],
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    return proc, run_dir, out
