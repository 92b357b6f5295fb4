"""ProcessSet: everything started, and everything those started, is stopped by PID."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from fedbench.core import interrupt
from fedbench.runtime.processes import ProcessSet, terminate_as_interrupt, wait_alive

# A parent that starts a child in a new session (like flower-superlink starts
# flower-superexec) and a grandchild, writes their PIDs, then exits itself, so
# both are orphaned and re-parented.
SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                         start_new_session=True)
grand = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time;"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']);"
    "time.sleep(300)"])
open(sys.argv[1], "w").write(f"{child.pid} {grand.pid}")
time.sleep(float(sys.argv[2]))
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_stop_ends_children_grandchildren_and_orphans(tmp_path: Path) -> None:
    procs = ProcessSet(poll_s=0.1)
    pids_file = tmp_path / "pids"
    spawner = procs.start(
        "spawner",
        [sys.executable, "-c", SPAWNER, str(pids_file), "1.5"],
        dict(os.environ),
        tmp_path / "spawner.log",
    )
    deadline = time.monotonic() + 30
    while not pids_file.exists() or not pids_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    child, grand = (int(p) for p in pids_file.read_text().split())
    time.sleep(0.5)  # the watcher records the tree
    assert wait_alive([spawner], 10.0) is spawner  # the spawner exits; its children live on
    assert _running(child) and _running(grand)
    # Subreaper: the orphans now belong to this process, not to init.
    assert psutil.Process(child).ppid() == os.getpid()
    seen = {pid for pid, _ in procs.describe()}
    assert {spawner.pid, child, grand} <= seen
    procs.stop(grace_s=5)
    assert not _running(child) and not _running(grand)
    assert procs.alive() == []
    assert all(not _running(pid) for pid in seen)


def test_a_process_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    procs = ProcessSet(poll_s=0.1)
    ready = tmp_path / "ignoring"
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').close(); time.sleep(300)"
    )
    stubborn = procs.start(
        "stubborn", [sys.executable, "-c", code, str(ready)], dict(os.environ), None
    )
    # Stop only once it ignores SIGTERM: on a loaded host Python's start-up alone
    # can outlast a fixed wait, and SIGTERM would then end it before any SIGKILL.
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "the child never started ignoring SIGTERM"
        time.sleep(0.05)
    killed = procs.stop(grace_s=1)
    assert killed == [f"stubborn (pid {stubborn.pid})"]
    assert stubborn.popen.returncode == -signal.SIGKILL


def test_sigterm_becomes_a_keyboard_interrupt() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_cut_short_kills_at_once_instead_of_waiting_the_grace(tmp_path: Path) -> None:
    """A second Ctrl-C hurries the stop: once `cut_short` says so, the grace ends."""
    procs = ProcessSet(poll_s=0.1)
    ready = tmp_path / "ignoring"
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').close(); time.sleep(300)"
    )
    stubborn = procs.start(
        "stubborn", [sys.executable, "-c", code, str(ready)], dict(os.environ), None
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "the child never started ignoring SIGTERM"
        time.sleep(0.05)
    asked = itertools.count()
    start = time.monotonic()
    killed = procs.stop(grace_s=60, cut_short=lambda: next(asked) >= 3)  # its 4th look
    assert time.monotonic() - start < 20  # not the 60 s grace
    assert killed == [f"stubborn (pid {stubborn.pid})"]
    assert stubborn.popen.returncode == -signal.SIGKILL


def test_the_first_signal_interrupts_and_a_second_only_hurries() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with interrupt.signals_interrupt_then_hurry() as stop:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM received"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        # The driver's `finally`: a second signal, either one, neither raises nor kills.
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while not stop.hurry.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.hurry.is_set()
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_once_the_stop_has_begun_only_hurries() -> None:
    with interrupt.signals_interrupt_then_hurry() as stop:
        stop.begun()  # the run ended on its own; its processes are being stopped
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while not stop.hurry.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert stop.hurry.is_set()
