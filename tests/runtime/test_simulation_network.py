"""A plain simulation run's Ray is this host's alone: it listens on 127.0.0.1, its folder is 0700.

Before, `python -m fedbench` started Ray with the host's outward address: the
GCS, the raylet's two ports, the driver and every ClientAppActor listened on
`::` (every interface), the runtime-env agent on the host's address, and Ray's
temp folder (`fbray-*`) and its session folder were mode 0777. The run is
listed while its actors are up: every listening TCP socket of the process and
its descendants, each with the process that holds it.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _listening(procs: list[psutil.Process]) -> list[tuple[str, str, int]]:
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


def _ray_folder(procs: list[psutil.Process]) -> Path:
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


def test_rays_sockets_are_on_loopback_and_its_folder_is_private(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedbench", "experiment=smoke", "scenario.days=30"]
        + [f"hydra.run.dir={run_dir}"],
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    try:
        deadline = time.monotonic() + 300
        tree: list[psutil.Process] = []
        # Once a ClientAppActor trains, every kind of Ray process is up.
        while not any("ClientAppActor" in _name(p) for p in tree):
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.5)
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        sockets = _listening(tree)
        names = {_name(p) for p in tree}
        folder = _ray_folder(tree)
        private = folder.parent  # fedbench's fbray-* folder, Ray's own inside it
        modes = {
            path: stat.S_IMODE(path.lstat().st_mode)
            for path in [private, folder, *folder.glob("session_2*")]
        }
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    shown = "\n".join(f"{n} {ip} {port}" for n, ip, port in sockets)
    assert {"gcs_server", "raylet"} <= names, names
    # The GCS, the raylet (2), the driver, the runtime-env agent and the actors.
    assert len(sockets) >= 5, shown
    assert all(ip in LOOPBACK for _, ip, _ in sockets), shown
    assert private.name.startswith("fbray-") and private.parent == Path(tempfile.gettempdir())
    assert modes[private] == 0o700, modes
    assert all(mode & 0o077 == 0 for mode in modes.values()), modes  # the session too
    assert len(modes) == 3, modes
    assert rc == 130, out.read_text()[-3000:]
    assert not private.exists()  # removed with the run


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""
