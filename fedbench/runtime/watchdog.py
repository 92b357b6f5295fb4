"""`python -m fedbench.runtime.watchdog TOKEN`: end a run's processes when its driver ends.

The ProcessSet (fedbench.runtime.processes) gives every process it starts
the environment variable `FEDBENCH_RUN_TOKEN=<TOKEN>`, which every helper
they start inherits (Flower passes its environment on), and starts this
watchdog in a session of its own with a pipe on its stdin whose other end
only the driver holds. The watchdog blocks on that pipe. When the driver
ends - normally, or by SIGKILL, which nothing inside the driver can see -
the pipe reaches end-of-file and the watchdog kills every process that
carries the token, wherever it was re-parented, until none is left.

Processes are found by their environment, not by their tree: a SIGKILLed
driver's children are re-parented to init at once, and a Flower helper
started in its own session is in no group of ours.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import psutil

TOKEN_ENV = "FEDBENCH_RUN_TOKEN"
SETTLE_S = 0.6  # no carrier seen for this long: done
GIVE_UP_S = 30.0


def carriers(token: str) -> list[psutil.Process]:
    """Live processes whose environment carries `token` (other users' are unreadable)."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter():
        if p.pid == me:
            continue
        try:
            if p.environ().get(TOKEN_ENV) == token and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def end_all(token: str) -> int:
    """SIGKILL every carrier of `token` until none appears for SETTLE_S; how many."""
    killed: set[int] = set()
    quiet_since = time.monotonic()
    end = time.monotonic() + GIVE_UP_S
    while time.monotonic() < end:
        found = carriers(token)
        for p in found:
            with contextlib.suppress(psutil.Error):
                p.kill()
                killed.add(p.pid)
        now = time.monotonic()
        if found:
            quiet_since = now
        elif now - quiet_since >= SETTLE_S:
            break
        time.sleep(0.1)
    return len(killed)


def main() -> int:
    token = sys.argv[1]
    with contextlib.suppress(OSError, KeyboardInterrupt):
        while sys.stdin.buffer.read(4096):
            pass  # the driver never writes: this returns at its end
    end_all(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
