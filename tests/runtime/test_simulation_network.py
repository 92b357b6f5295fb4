"""A plain simulation run's Ray is this host's alone: it listens on 127.0.0.1, its folder is 0700.

Before, `python -m fedbench` started Ray with the host's outward address: the
GCS, the raylet's two ports, the driver and every ClientAppActor listened on
`::` (every interface), the runtime-env agent on the host's address, and Ray's
temp folder (`fbray-*`) and its session folder were mode 0777. The run is
listed while its actors are up: every listening TCP socket of the process and
its descendants, each with the process that holds it.
"""

from __future__ import annotations

import signal
import stat
import tempfile
from pathlib import Path

import pytest

from tests.runtime.ray_session import listening, name_of, ray_folder, start_smoke, wait_for_actors

pytestmark = pytest.mark.slow

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def test_rays_sockets_are_on_loopback_and_its_folder_is_private(tmp_path: Path) -> None:
    proc, run_dir, out = start_smoke(tmp_path, days=30)
    try:
        tree = wait_for_actors(proc, out)
        sockets = listening(tree)
        names = {name_of(p) for p in tree}
        folder = ray_folder(tree)
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
