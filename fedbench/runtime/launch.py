"""`python -m fedbench.runtime.launch [limits] -- COMMAND...`: exec COMMAND under OS limits.

    python -m fedbench.runtime.launch --cpus 0,1 --address-space-mb 4600 -- flower-supernode ...

Sets the limits on itself - CPU affinity, RLIMIT_AS, membership of a cgroup
v2 directory - and replaces itself with COMMAND, so the command and every
process it starts inherit them (fedbench.runtime.limits explains the
choice of limits). A launcher process instead of a `preexec_fn` keeps the
limits visible in `ps` and out of the forking thread of the caller.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fedbench.runtime.launch")
    p.add_argument("--cpus", help="comma-separated CPU ids to pin to")
    p.add_argument("--address-space-mb", type=int, help="RLIMIT_AS in MB")
    p.add_argument("--cgroup", type=Path, help="cgroup v2 directory to join")
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


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        _parser().error("no command after --")
    apply(args.cpus, args.address_space_mb, args.cgroup)
    sys.stdout.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
