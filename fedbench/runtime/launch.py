"""`python -m fedbench.runtime.launch [limits] -- COMMAND...`: exec COMMAND under OS limits.

    python -m fedbench.runtime.launch --die-with-parent 4242 --cpus 0,1 \
        --address-space-mb 4600 -- flower-supernode ...

Sets the limits on itself - CPU affinity, RLIMIT_AS, membership of a cgroup
v2 directory - and replaces itself with COMMAND, so the command and every
process it starts inherit them (fedbench.runtime.limits explains the
choice of limits). A launcher process instead of a `preexec_fn` keeps the
limits visible in `ps` and out of the forking thread of the caller.

`--die-with-parent PID` asks the kernel to SIGKILL the command when the
process that started it ends, however it ends (`PR_SET_PDEATHSIG`, kept
across exec): a driver killed with SIGKILL takes its SuperLink, proxy and
SuperNodes with it. PID is the expected parent; if it is already gone
the launcher exits at once instead of exec-ing an orphan.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import signal
import sys
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fedbench.runtime.launch")
    p.add_argument("--cpus", help="comma-separated CPU ids to pin to")
    p.add_argument("--address-space-mb", type=int, help="RLIMIT_AS in MB")
    p.add_argument("--cgroup", type=Path, help="cgroup v2 directory to join")
    p.add_argument("--die-with-parent", type=int, metavar="PID", help="SIGKILL when PID ends")
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


def apply(cpus: str | None, address_space_mb: int | None, cgroup: Path | None) -> None:
    if cgroup is not None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    if address_space_mb:
        limit = address_space_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """SIGKILL this process (and what it execs) when `parent` ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    if int(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent ended before the request took hold
        os._exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        _parser().error("no command after --")
    if args.die_with_parent is not None:
        die_with_parent(args.die_with_parent)
    apply(args.cpus, args.address_space_mb, args.cgroup)
    sys.stdout.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
