"""No process of a private Ray session outlives the simulation run that started it.

`ray.shutdown` stops the GCS and the raylet, but the raylet's agents and
workers (DashboardAgent, RuntimeEnvAgent, ClientAppActor) notice its death
only by polling: they were still alive 2 s after a run had exited, and after
a SIGKILL of the driver the agents stayed (over 30 s: they keep trying to
report to the dead GCS). So a session's processes are known two ways: the
driver's descendants right after `ray.init` (`Session.remember`, by PID and
start time, so a recycled PID is never hit; the agents are among them), and a
token in the environment (`watchdog.TOKEN_ENV`, set before `ray.init`: Ray's
workers, started later, inherit it). Then:

- after `ray.shutdown` (`Session.end`), what is left is asked to exit (SIGTERM: the
  session has no work left for it, and waiting for its own polling to notice cost
  every run about 2 s at its end), gets GRACE_S to do so, then SIGKILL;
- a watchdog (`python -m fedbench.runtime.ray_leftovers TOKEN [FOLDER]`),
  started with a pipe only this process holds, on which the driver writes what
  it remembered, does the same when the driver dies without cleaning up, and
  then removes the session's private `fbray-*` folder (Ray's files and the
  run's Ray token, fedbench.runtime.ray_auth), which the driver would have
  removed: that exact folder, if it is still a directory of this account's,
  and never through a link.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil

from fedbench.runtime.environ import scoped_environ
from fedbench.runtime.watchdog import TOKEN_ENV, carriers, end_all

GRACE_S = 1.0  # after ray.shutdown, for what is left to exit by itself
FOLDER_PREFIX = "fbray-"  # the private folder's name (fedbench.runtime.simulation)


class Session:
    def __init__(self, token: str, dog: subprocess.Popen[bytes]) -> None:
        self.token = token
        self.dog = dog
        self.known: list[psutil.Process] = []

    def remember(self) -> None:
        """The driver's descendants now (after ray.init): the session's, bar the watchdog."""
        for p in psutil.Process().children(recursive=True):
            if p.pid != self.dog.pid:
                self.known.append(p)  # psutil refuses to signal it once its PID is reused
                with contextlib.suppress(OSError, psutil.Error):
                    assert self.dog.stdin is not None
                    self.dog.stdin.write(f"{p.pid} {p.create_time()!r}\n".encode())
                    self.dog.stdin.flush()

    def end(self, grace_s: float = GRACE_S) -> None:
        """After `ray.shutdown`: SIGTERM what is left, wait `grace_s` for it, then SIGKILL."""
        deadline = time.monotonic() + grace_s
        _terminate(_alive(self.known) + carriers(self.token))
        while _alive(self.known) or carriers(self.token):
            if time.monotonic() >= deadline:
                _kill(self.known)
                end_all(self.token)
                return
            time.sleep(0.05)


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out


def _terminate(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()  # psutil checks the start time: never a recycled PID


def _kill(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()  # psutil checks the start time: never a recycled PID


@contextlib.contextmanager
def session(folder: str | None = None) -> Iterator[Session]:
    """Within it, processes started from here carry a fresh token; a watchdog stands by.

    `folder`: the session's private folder, which the watchdog removes should this
    process die first (None: there is none, or it is not ours to remove).
    """
    token = secrets.token_hex(12)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    args = [token] if folder is None else [token, os.path.abspath(folder)]
    # Its stdin is a pipe only this process holds (Popen closes other fds in children,
    # Ray's included): end-of-file there is this process's end, however it ends.
    dog = subprocess.Popen(
        [sys.executable, "-m", "fedbench.runtime.ray_leftovers", *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with scoped_environ({TOKEN_ENV: token}):
            yield Session(token, dog)
    finally:
        dog.kill()  # its work is Session.end's, done by now
        with contextlib.suppress(subprocess.TimeoutExpired):
            dog.wait(timeout=5)
        if dog.stdin is not None:
            with contextlib.suppress(OSError):
                dog.stdin.close()


def remove_folder(path: str) -> bool:
    """Remove a dead session's private folder; whether it did.

    Only the path the driver named, and only if it is a `fbray-*` directory of
    this account's - not a link to one, nor anything else put in its place.
    `shutil.rmtree` on a platform whose version works through directory file
    descriptors follows no link inside it either; elsewhere nothing is removed.
    """
    if not os.path.basename(path).startswith(FOLDER_PREFIX):
        return False
    try:
        info = os.lstat(path)  # the entry itself: a link is not followed
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    if not shutil.rmtree.avoids_symlink_attacks:
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


def main() -> int:
    """The watchdog: at end-of-file on stdin (the driver's end), end the session, then
    remove its folder (`sys.argv[2]`, if named): its processes no longer use it."""
    token = sys.argv[1]
    folder = sys.argv[2] if len(sys.argv) > 2 else None
    known: list[psutil.Process] = []
    with contextlib.suppress(OSError, KeyboardInterrupt):
        for line in sys.stdin.buffer:
            with contextlib.suppress(ValueError, psutil.Error):
                pid, created = line.split()
                p = psutil.Process(int(pid))
                if abs(p.create_time() - float(created)) < 1e-3:
                    known.append(p)
    _kill(known)
    end_all(token)
    if folder is not None:
        remove_folder(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
