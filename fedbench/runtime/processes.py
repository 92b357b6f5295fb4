"""Every process a deployment starts, and stopping all of them by PID.

Flower's servers have helpers of their own: the SuperLink a detached
SuperExec (`fedbench.runtime.superexec`, own session) that starts `flwr-serverapp`;
each SuperNode a SuperExec that starts one `flwr-clientapp` per message.
Killing a process group therefore misses some of them, and a helper whose
parent dies is re-parented and keeps running. So the `ProcessSet` makes
this process a child subreaper (Linux: orphans of our descendants come back
to us, not to init), remembers every descendant it has seen (PID plus
creation time, so a recycled PID is never touched), and `stop()` terminates
the lot - leaves first - then kills what is left and reaps the zombies.

That covers every ending fedbench sees. For the one it cannot see - SIGKILL
of fedbench itself - three things: every process is started through the
launcher with `--die-with-parent` (the kernel kills it with its parent:
PR_SET_PDEATHSIG); every process carries a per-set token in its
environment, inherited by every helper, and a watchdog
(fedbench.runtime.watchdog) that only the driver's death wakes kills every
carrier, wherever it was re-parented; and every process seen is appended to
`logs/processes.csv` as it is discovered (PID, creation time, role), so
the next run in the folder sweeps whatever survived even that (`sweep`).

The record is a file in a run folder, so the sweep believes none of it
(docs/security.md). Each line carries the PID, the start time and the
command line the process had when it was seen (again when it exec'ed), and
the folder it was written in (`folder_identity`), and an HMAC of all of it
under this user's key (fedbench.trust.key): a line added by hand, or one
naming another process, is not signed, and a signed line copied from
another live run's record into this folder is signed for that folder, not
this one: neither is acted on. The file is mode 0600, and is never
written through a symbolic link (fedbench.folders). A signed line
is acted on only through a pidfd (`pidfd_open`, then the start time and the
command line read back and compared, then `pidfd_send_signal`): a process
that ended in between, and the one that inherited its PID, are never
signalled. Whatever is skipped is said, with why.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

from fedbench.folders import make_folder, open_to_write
from fedbench.runtime import entry
from fedbench.runtime.watchdog import GIVE_UP_S, TOKEN_ENV
from fedbench.trust import key

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
LAUNCHER = ("-m", "fedbench.runtime.launch")
RECORD_FIELDS = ("pid", "create_time", "role", "cmdline", "folder", "hmac")
RECORD_HEADER = ",".join(RECORD_FIELDS) + "\n"
RECORD_LABEL = "processes"
RECORD_MODE = 0o600  # who can read it knows what runs, and with which arguments


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@dataclass
class Started:
    """One process this set launched."""

    role: str  # e.g. "superlink", "supernode rpi4-000"
    popen: subprocess.Popen[bytes]
    log: Path | None
    argv: tuple[str, ...]

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass
class ProcessSet:
    """Launches processes and guarantees none of them, nor their children, outlives `stop()`."""

    poll_s: float = 0.5
    record: Path | None = None  # logs/processes.csv: every process seen, as it is seen
    die_with_parent: bool = True  # children get SIGKILL when this process ends
    watchdog: bool = True  # and a watchdog ends their helpers too (watchdog.py)
    token: str = field(default_factory=lambda: secrets.token_hex(12))
    _dog: subprocess.Popen[bytes] | None = None
    started: list[Started] = field(default_factory=list)
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create_time
    roles: dict[int, str] = field(default_factory=dict)
    cmdlines: dict[int, list[str]] = field(default_factory=dict)  # as last recorded
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _watcher: threading.Thread | None = None
    _folder: str = ""  # folder_identity() of the record's folder: what every line is signed for

    def __post_init__(self) -> None:
        become_subreaper()
        if self.record is not None:
            make_folder(self.record.parent)  # never a link (fedbench.folders)
            self._folder = folder_identity(self.record.parent)
            with open_to_write(self.record, "w", RECORD_MODE) as f:
                os.fchmod(f.fileno(), RECORD_MODE)  # also when it existed, readable by others
                f.write(RECORD_HEADER)

    def _wrapped(self, argv: Sequence[str]) -> list[str]:
        """`argv` through the launcher, told to die with this process."""
        argv = list(argv)
        if not self.die_with_parent:
            return argv
        flag = ["--die-with-parent", str(os.getpid())]
        if tuple(argv[1:3]) == LAUNCHER:
            return [*argv[:3], *flag, *argv[3:]]
        return [sys.executable, *LAUNCHER, *flag, "--", *argv]

    def start(
        self,
        role: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        log: Path | None,
        stdout: int | IO[bytes] | None = None,
        cwd: Path | None = None,
    ) -> Started:
        """Start `argv` in a session of its own, output to `log` (or `stdout`)."""
        if self.watchdog and self._dog is None:
            self._start_watchdog(env)
        out: int | IO[bytes] | None = stdout
        handle = None
        if log is not None:
            make_folder(log.parent)
            handle = open_to_write(log, "ab")  # never through a link planted at the name
            out = handle
        try:
            # Own session: a Ctrl-C on the terminal reaches fedbench only,
            # which then stops everything in order.
            popen = subprocess.Popen(
                self._wrapped(argv),
                env={**env, TOKEN_ENV: self.token},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=cwd,
            )
        finally:
            if handle is not None:
                handle.close()
        proc = Started(role, popen, log, tuple(argv))
        with self._lock:
            self.started.append(proc)
            self._remember(popen.pid, role)
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="fedbench-procs", daemon=True)
            self._watcher.start()
        return proc

    def _start_watchdog(self, env: Mapping[str, str]) -> None:
        # Its stdin is a pipe only this process holds (Popen closes other fds in
        # children): end-of-file there is this process's end, however it ends.
        self._dog = subprocess.Popen(
            [sys.executable, "-m", "fedbench.runtime.watchdog", self.token],
            env={k: v for k, v in env.items() if k != TOKEN_ENV},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        with self._lock:
            self._remember(self._dog.pid, "watchdog")

    def _remember(self, pid: int, role: str) -> None:
        """Record `pid` when first seen, and again whenever its command line changed (exec)."""
        try:
            p = psutil.Process(pid)
            created = p.create_time()
            cmdline = p.cmdline()
        except psutil.Error:
            return
        if pid in self.seen and (self.seen[pid] != created or self.cmdlines[pid] == cmdline):
            return  # known as it is (or a recycled PID: not ours)
        self.seen[pid] = created
        self.roles.setdefault(pid, role)
        self.cmdlines[pid] = cmdline
        if self.record is not None:
            with open_to_write(self.record, "a", RECORD_MODE) as f:
                f.write(record_line(pid, created, self.roles[pid], cmdline, self._folder))

    def snapshot(self) -> None:
        """Record every live descendant of the processes started so far."""
        with self._lock:
            for proc in self.started:
                self._remember(proc.pid, proc.role)  # exec'ed since (the launcher does)
                try:
                    children = psutil.Process(proc.pid).children(recursive=True)
                except psutil.Error:
                    continue
                for child in children:
                    self._remember(child.pid, f"{proc.role} > {_name(child)}")

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.snapshot()

    def alive(self) -> list[psutil.Process]:
        """Processes of this set still running (zombies excluded), by PID and creation time."""
        out = []
        with self._lock:
            items = list(self.seen.items())
        for pid, created in items:
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def stop(
        self,
        grace_s: float = 5.0,
        cut_short: Callable[[], bool] | None = None,
        first: Callable[[str], bool] | None = None,
    ) -> list[str]:
        """Terminate everything, leaves first, kill after `grace_s`; returns what was killed.

        `first`: the roles terminated, and waited for, before the others: the
        ServerApp writes the run's ending while its SuperExec, whose end kills it
        (PR_SET_PDEATHSIG), is still there. `cut_short`: asked while the grace
        runs; once it says True, what is left is killed at once (a second Ctrl-C,
        once the ServerApp wrote the run's ending).
        """
        self.snapshot()
        self._stop.set()
        procs = [p for p in self.alive() if self._dog is None or p.pid != self._dog.pid]
        # Deepest first: a helper whose parent is still alive exits cleanly
        # instead of being re-parented mid-shutdown.
        procs.sort(key=_depth, reverse=True)
        end = time.monotonic() + grace_s
        early = [p for p in procs if first is not None and first(self.roles.get(p.pid, ""))]
        if early:
            _terminate(early)
            self._wait(early, grace_s, cut_short)
        _terminate([p for p in procs if p not in early])
        left = self._wait(procs, max(end - time.monotonic(), 1.0), cut_short)
        killed = [f"{self.roles.get(p.pid, '?')} (pid {p.pid})" for p in left]
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        self._wait(left, grace_s)
        for proc in self.started:
            proc.popen.poll()  # collects the exit code of one that ended on its own
        self._reap()
        if self._watcher is not None:
            self._watcher.join(timeout=2 * self.poll_s + 1)
        if self._dog is not None:
            assert self._dog.stdin is not None
            self._dog.stdin.close()  # wakes it: it ends whatever is left, then itself
            try:
                self._dog.wait(timeout=GIVE_UP_S + 5)
            except subprocess.TimeoutExpired:
                self._dog.kill()
        return killed

    def _wait(
        self,
        procs: list[psutil.Process],
        timeout: float,
        cut_short: Callable[[], bool] | None = None,
    ) -> list[psutil.Process]:
        """Wait for `procs` (until `cut_short()`, if given, says stop waiting); those left.

        Our own children through Popen, so it keeps their exit codes.
        """
        mine = {s.pid: s.popen for s in self.started}
        end = time.monotonic() + timeout
        left = list(procs)
        while True:
            left = [p for p in left if _running(p, mine.get(p.pid))]
            if not left or time.monotonic() >= end or (cut_short is not None and cut_short()):
                return left
            time.sleep(0.05)

    def _reap(self) -> None:
        # Orphans re-parented to us (subreaper) are our children now: collect them.
        for pid, created in list(self.seen.items()):
            try:
                p = psutil.Process(pid)
                if p.create_time() != created or p.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                continue
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)

    def describe(self) -> list[tuple[int, str]]:
        """(pid, role) of every process this set ever saw, in order of discovery."""
        return [(pid, self.roles.get(pid, "?")) for pid in self.seen]


def _terminate(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()


def _running(p: psutil.Process, popen: subprocess.Popen[bytes] | None) -> bool:
    """Still running: our child not yet exited (Popen reaps it), another not gone or a zombie."""
    if popen is not None:
        return popen.poll() is None
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(p: psutil.Process) -> str:
    try:
        cmd = p.cmdline()
        if len(cmd) > 3 and cmd[1:3] == ["-m", entry.MODULE]:
            return cmd[3]  # one of Flower's scripts, run by fedbench's interpreter
        return os.path.basename(cmd[1] if len(cmd) > 1 and "python" in cmd[0] else cmd[0])
    except (psutil.Error, IndexError):
        return "?"


def _depth(p: psutil.Process) -> int:
    depth = 0
    try:
        parent = p.parent()
        while parent is not None and depth < 64:
            depth += 1
            parent = parent.parent()
    except psutil.Error:
        pass
    return depth


def folder_identity(folder: Path) -> str:
    """What a record line is signed for: the folder holding the record, as this host knows it.

    Its device and inode (the folder itself, not what a link there points to) and
    its resolved path: the same for the folder however it is named, and after
    a resume; another for a copy of the record in any other folder, which the
    copier cannot give the original's inode while it exists.
    """
    info = os.lstat(folder)
    return f"{info.st_dev}:{info.st_ino}:{os.path.realpath(folder)}"


def record_line(pid: int, created: float, role: str, cmdline: Sequence[str], folder: str) -> str:
    """One signed line of logs/processes.csv; `folder`: folder_identity() of its folder."""
    command = json.dumps(list(cmdline))
    values = [str(pid), repr(created), role, command, folder]
    mac = key.sign(RECORD_LABEL, "\0".join(values).encode())
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([*values, mac])
    return out.getvalue()


@dataclass(frozen=True)
class Swept:
    """What a sweep did: what it killed, and what it refused to touch and why."""

    killed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def sweep(record: Path) -> Swept:
    """Kill what a previous run recorded in `record` and left running, once each is proven ours.

    A line counts only if this user's key signed it for the folder that holds
    `record` (a line copied from another run's record is not this folder's to
    act on), and its process is signalled only through a pidfd after its start
    time and command line were read back equal to the line's (module docstring).
    """
    out = Swept()
    try:
        text = record.read_text(errors="replace")
        here = folder_identity(record.parent)
    except OSError:
        return out
    signed: dict[tuple[int, float], list[tuple[str, list[str]]]] = {}
    for n, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if n == 1 or not row:
            continue
        entry = _signed(row)
        if entry is None:
            out.refused.append(f"{record.name} line {n}: not signed by this account's key")
            continue
        pid, created, role, cmdline, folder = entry
        if folder != here:
            where = folder.split(":", 2)[-1]
            out.refused.append(
                f"{record.name} line {n}: signed for another folder ({where}), not this one: "
                "copied from another run's record"
            )
            continue
        signed.setdefault((pid, created), []).append((role, cmdline))
    for (pid, created), seen in signed.items():
        outcome = _kill_if_same(pid, created, seen)
        if outcome is not None:
            killed, what = outcome
            (out.killed if killed else out.refused).append(what)
    return out


def _signed(row: list[str]) -> tuple[int, float, str, list[str], str] | None:
    if len(row) != len(RECORD_FIELDS):
        return None
    *values, mac = row
    if not key.verify(RECORD_LABEL, "\0".join(values).encode(), mac):
        return None
    try:
        cmdline = json.loads(values[3])
        return int(values[0]), float(values[1]), values[2], [str(c) for c in cmdline], values[4]
    except (ValueError, TypeError):
        return None


def _kill_if_same(
    pid: int, created: float, seen: list[tuple[str, list[str]]]
) -> tuple[bool, str] | None:
    """SIGKILL `pid` through a pidfd if it is still the process recorded: (killed, what);
    None where there is nothing to say (gone, a zombie, a recycled PID)."""
    role = seen[0][0]
    if pid == os.getpid():
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except (ProcessLookupError, OSError):
        return None  # gone
    try:
        # From here `pid` names the process the pidfd holds, or the signal fails.
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return None
        started, cmdline = p.create_time(), p.cmdline()
        if abs(started - created) > 0.01:
            return None  # a recycled PID: another process, never ours to touch
        if all(cmdline != recorded for _, recorded in seen):
            shown = " ".join(cmdline)[:120]
            return False, f"{role} (pid {pid}): its command line is not the recorded one ({shown})"
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True, f"{role} (pid {pid})"
    except (psutil.Error, ProcessLookupError):
        return None
    finally:
        os.close(pidfd)


def wait_alive(procs: Sequence[Started], seconds: float) -> Started | None:
    """Sleep up to `seconds`; return the first started process that exited meanwhile."""
    end = time.monotonic() + seconds
    while True:
        for proc in procs:
            if proc.popen.poll() is not None:
                return proc
        left = end - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(0.2, left))


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C: through the `finally` that stops every process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
