"""Run a command and record the CPU seconds of its whole process tree.

`python experiments/scale_study/cputime.py OUT.json -- COMMAND...`

The study's sizing is in CPU seconds, not wall seconds: the host is shared,
so a run's wall time says more about its neighbours than about the run. A
simulation's work is done in Ray's worker processes, which `time` does not
see (they are not waited for by the command), so this polls the tree every
`POLL_S` seconds with psutil and keeps each process's last user + system
time; what a process spends after its last poll is lost (at most POLL_S of
CPU per short-lived process; Ray's workers live for the whole run). Writes
{"cpu_s", "wall_s", "returncode", "processes"} to OUT.json and exits with the
command's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

POLL_S = 1.0


def tree_cpu(root: psutil.Process, seen: dict[tuple[int, float], float]) -> None:
    """Update `seen` ((pid, start time) -> user + system seconds) from root's tree."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                key = (proc.pid, proc.create_time())
        except psutil.Error:
            continue
        seen[key] = max(seen.get(key, 0.0), times.user + times.system)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out, command = Path(argv[0]), argv[2:]
    seen: dict[tuple[int, float], float] = {}
    start = time.monotonic()
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    while child.poll() is None:
        tree_cpu(root, seen)
        time.sleep(POLL_S)
    record = {
        "cpu_s": round(sum(seen.values()), 1),
        "wall_s": round(time.monotonic() - start, 1),
        "returncode": child.returncode,
        "processes": len(seen),
        "command": command,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    return int(child.returncode)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
