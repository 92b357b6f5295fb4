"""`resume=`'s sweep of logs/processes.csv signals only processes proven to be the run's own."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from fedbench.runtime.processes import ProcessSet, sweep

HEADER = "pid,create_time,role,cmdline,hmac\n"


@pytest.fixture
def bystander() -> Iterator[psutil.Process]:
    """A process of the same user that no fedbench run started."""
    proc = subprocess.Popen(["sleep", "120"])
    process = psutil.Process(proc.pid)
    # Popen returns once exec has begun; until the kernel has laid out the new program's
    # arguments /proc/<pid>/cmdline reads empty, so wait for the command line to appear.
    deadline = time.monotonic() + 10
    while process.cmdline() != ["sleep", "120"] and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield process
    finally:
        proc.kill()
        proc.wait()


def test_a_line_added_by_hand_kills_nothing(tmp_path: Path, bystander: psutil.Process) -> None:
    record = tmp_path / "processes.csv"
    created = bystander.create_time()
    lines = [
        f"{bystander.pid},{created!r},superlink",  # the old three-column form
        f'{bystander.pid},{created!r},superlink,"[""sleep"", ""120""]",{"0" * 64}',  # unsigned
    ]
    record.write_text(HEADER + "\n".join(lines) + "\n")
    swept = sweep(record)
    time.sleep(0.2)
    assert bystander.is_running() and bystander.status() != psutil.STATUS_ZOMBIE
    assert swept.killed == []
    assert swept.refused == [
        "processes.csv line 2: not signed by this account's key",
        "processes.csv line 3: not signed by this account's key",
    ]


def test_a_signed_line_whose_command_line_differs_is_refused(
    tmp_path: Path, bystander: psutil.Process
) -> None:
    from fedbench.runtime.processes import record_line  # signed with this user's key

    record = tmp_path / "processes.csv"
    line = record_line(bystander.pid, bystander.create_time(), "supernode", ["flower-supernode"])
    record.write_text(HEADER + line)
    swept = sweep(record)
    assert bystander.is_running() and swept.killed == []
    assert swept.refused == [
        f"supernode (pid {bystander.pid}): its command line is not the recorded one (sleep 120)"
    ]


def test_what_a_killed_run_left_is_swept(tmp_path: Path) -> None:
    record = tmp_path / "processes.csv"
    procs = ProcessSet(record=record, watchdog=False)  # through the launcher, which execs
    try:
        started = procs.start("sleeper", ["sleep", "120"], {"PATH": "/usr/bin:/bin"}, None)
        deadline = time.monotonic() + 30
        while psutil.Process(started.pid).cmdline() != ["sleep", "120"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        procs.snapshot()  # what the watcher does every poll_s: it sees the exec
        swept = sweep(record)
        assert swept.killed == [f"sleeper (pid {started.pid})"] and swept.refused == []
        assert started.popen.wait(timeout=10) == -9
    finally:
        procs.stop()
