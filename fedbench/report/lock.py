"""One run per folder at a time: `<run>/run.lock`, naming the holder's PID.

The lock is an advisory `flock` on the file, held for the life of the
process that took it: the kernel drops it when that process ends, however
it ends (SIGKILL included), so a crashed run never leaves a stale lock and
`resume=` can take the folder at once. The flock is the truth: who holds
it is read from the kernel (`/proc/locks`), never from the file, whose text
(the holder's PID) only makes a refusal message readable - a live process
holding the lock with text naming pid 1, or this run's own PID, still keeps
every other run out. A run that ends removes
the file (while still holding it); a run that takes the lock checks that
the file it locked is still the one at the path, so a file removed under
it cannot give two runs the folder. A `run.lock` that is a symbolic link
(planted in a folder from someone else) is refused, never written through
(fedbench.folders).

The run itself may enter the folder its driver holds: the simulation's
ServerApp in the driver's own process, a deployment's ServerApp several
processes below it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

import psutil

from fedbench.errors import FedbenchError
from fedbench.folders import open_fd

LOCK_FILE = "run.lock"


class RunLock:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        """Take the folder, or raise naming the run that has it.

        Returns without holding anything when an ancestor of this process
        holds it (the driver of the run this process belongs to).
        """
        if self._fd is not None:
            return self
        for _ in range(100):  # a holder that ends removes the file: lock the new one
            if self._try():
                return self
        raise FedbenchError(f"run folder {self.path.parent}: {self.path} keeps being replaced")

    def _try(self) -> bool:
        """Lock the file at the path: True when held (by us or our driver), False
        when the file was removed while we locked it; raises when another run holds it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Never through a link planted at the name (fedbench.folders): the file locked,
            # truncated and written is the folder's own.
            fd = open_fd(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FedbenchError(f"run folder {self.path.parent}: cannot lock it ({exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = flock_holders(fd)
            said = _holder(fd)
            os.close(fd)
            if holders & ({os.getpid()} | _ancestors()):
                return True  # this run's driver has it (in-process, or a parent process)
            who = ", ".join(f"pid {h}" for h in sorted(holders)) or "another process"
            if said is not None and said not in holders:
                who += f"; the file says pid {said}"
            raise FedbenchError(
                f"run folder {self.path.parent} is in use by another fedbench run ({who}, "
                f"see {self.path}); wait for it to end, or give another hydra.run.dir"
            ) from None
        if not _same_file(fd, self.path):
            os.close(fd)  # locked a file its holder removed on the way out
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # still holding the lock: nobody can have taken this file
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.lstat(path).st_ino
    except OSError:
        return False


def flock_holders(fd: int, locks: Path = Path("/proc/locks")) -> set[int]:
    """PIDs the kernel says hold a flock on the file open at `fd` (empty if it cannot say)."""
    info = os.fstat(fd)
    ident = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        lines = locks.read_text().splitlines()
    except OSError:
        return set()
    exact: set[int] = set()
    same_inode: set[int] = set()  # where stat's device is not the one the kernel prints
    for line in lines:
        fields = line.split()
        # "N: FLOCK ADVISORY WRITE pid maj:min:inode 0 EOF"; waiters have "->" after N:
        if len(fields) < 6 or fields[1] != "FLOCK" or not fields[4].isdigit():
            continue
        if fields[5] == ident:
            exact.add(int(fields[4]))
        elif fields[5].rsplit(":", 1)[-1] == str(info.st_ino):
            same_inode.add(int(fields[4]))
    return exact or same_inode


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 64, 0).decode(errors="replace").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


def _ancestors() -> set[int]:
    try:
        return {p.pid for p in psutil.Process().parents()}
    except psutil.Error:
        return set()
