"""The run lock is the kernel's flock: a live holder keeps the folder, whatever run.lock says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.report.lock import LOCK_FILE, RunLock

# A process that is no fedbench run: it holds the flock and writes whatever it likes.
_HOLD = (
    "import fcntl, os, sys, time; "
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); "
    "fcntl.flock(fd, fcntl.LOCK_EX); os.ftruncate(fd, 0); os.write(fd, sys.argv[2].encode()); "
    "print('held', flush=True); time.sleep(60)"
)


def _holder(path: Path, text: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path), text], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("says", ["1 2024-01-01T00:00:00\n", "{me} now\n", "", "garbage"])
def test_a_live_holder_keeps_the_folder_whatever_its_file_says(tmp_path: Path, says: str) -> None:
    # pid 1 is every process's ancestor, and our own pid is "this run": both were let through.
    holder = _holder(tmp_path / LOCK_FILE, says.format(me=os.getpid()))
    refused = f"in use by another fedbench run \\(pid {holder.pid}"
    try:
        with pytest.raises(FedbenchError, match=refused):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path) as held:  # the holder is gone: the folder is free
        assert held.held


def test_the_driver_of_the_run_still_enters_its_own_folder(tmp_path: Path) -> None:
    # A child of the holder (the deployment's ServerApp is several processes below it).
    code = (
        "import subprocess, sys; from pathlib import Path; "
        "from fedbench.report.lock import RunLock; RunLock(Path(sys.argv[1])).acquire(); "
        "child = 'import sys; from pathlib import Path; from fedbench.report.lock import RunLock; "
        "print(RunLock(Path(sys.argv[1])).acquire().held)'; "
        "sys.exit(subprocess.run([sys.executable, '-c', child, sys.argv[1]]).returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"  # entered without taking it: its driver holds it
