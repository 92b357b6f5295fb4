"""One run per folder at a time: `<run>/run.lock`, naming the holder's PID.

The lock is an advisory `flock` on the file, held for the life of the
process that took it: the kernel drops it when that process ends, however
it ends (SIGKILL included), so a crashed run never leaves a stale lock and
`resume=` can take the folder at once. The file's text names the holder,
so a refused second run says who has the folder.

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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise FedbenchError(f"run folder {self.path.parent}: cannot lock it ({exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            if holder is not None and (holder == os.getpid() or holder in _ancestors()):
                return self  # this run's driver has it (in-process, or a parent process)
            who = f"pid {holder}" if holder is not None else "another process"
            raise FedbenchError(
                f"run folder {self.path.parent} is in use by another fedbench run ({who}, "
                f"see {self.path}); wait for it to end, or give another hydra.run.dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


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
