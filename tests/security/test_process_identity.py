"""`resume=`'s sweep of logs/processes.csv signals only processes proven to be the run's own:
signed by this user's key, for this folder (a copy of another live run's record stops nothing),
with the start time and command line the process still has."""

from __future__ import annotations

import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from fedbench.runtime.processes import ProcessSet, folder_identity, record_line, sweep

HEADER = "pid,create_time,role,cmdline,folder,hmac\n"


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
        f'{bystander.pid},{created!r},superlink,"[""sleep"", ""120""]",{"0" * 64}',  # old form
        f'{bystander.pid},{created!r},superlink,"[""sleep"", ""120""]",x,{"0" * 64}',  # unsigned
    ]
    record.write_text(HEADER + "\n".join(lines) + "\n")
    swept = sweep(record)
    time.sleep(0.2)
    assert bystander.is_running() and bystander.status() != psutil.STATUS_ZOMBIE
    assert swept.killed == []
    assert swept.refused == [
        "processes.csv line 2: not signed by this account's key",
        "processes.csv line 3: not signed by this account's key",
        "processes.csv line 4: not signed by this account's key",
    ]


def test_a_signed_line_whose_command_line_differs_is_refused(
    tmp_path: Path, bystander: psutil.Process
) -> None:
    record = tmp_path / "processes.csv"
    here = folder_identity(tmp_path)  # signed with this user's key, for this folder
    line = record_line(
        bystander.pid, bystander.create_time(), "supernode", ["flower-supernode"], here
    )
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


def _sleeper(record: Path) -> tuple[ProcessSet, int]:
    """A ProcessSet recording in `record`, and the pid of the `sleep 120` it started."""
    procs = ProcessSet(record=record, watchdog=False)  # through the launcher, which execs
    started = procs.start("sleeper", ["sleep", "120"], {"PATH": "/usr/bin:/bin"}, None)
    deadline = time.monotonic() + 30
    while psutil.Process(started.pid).cmdline() != ["sleep", "120"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    procs.snapshot()  # the exec'ed command line, recorded and signed
    return procs, started.pid


def test_a_record_copied_from_a_live_run_into_another_folder_stops_nothing(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a" / "logs", tmp_path / "b" / "logs"
    procs, pid = _sleeper(a / "processes.csv")
    try:
        b.mkdir(parents=True)
        shutil.copy2(a / "processes.csv", b / "processes.csv")
        swept = sweep(b / "processes.csv")
        time.sleep(0.2)
        assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # still running
        assert swept.killed == []
        lines = len((b / "processes.csv").read_text().splitlines())
        assert lines >= 3  # the launcher, then the sleep it exec'ed
        assert swept.refused == [
            f"processes.csv line {n}: signed for another folder ({a.resolve()}), not this one: "
            "copied from another run's record"
            for n in range(2, lines + 1)
        ]
        # The same lines, in the folder they were signed for: its own resume stops them.
        swept = sweep(a / "processes.csv")
        assert swept.killed == [f"sleeper (pid {pid})"] and swept.refused == []
    finally:
        procs.stop()


def test_the_folder_a_line_is_signed_for_is_part_of_what_is_signed(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    line = record_line(12345, 1.5, "superlink", ["flower-superlink"], folder_identity(a))
    forged = line.replace(folder_identity(a), folder_identity(b))  # claims to be b's own
    (b / "processes.csv").write_text(HEADER + forged)
    assert sweep(b / "processes.csv").refused == [
        "processes.csv line 2: not signed by this account's key"
    ]


def test_a_resumed_folder_is_the_same_folder_however_it_is_named(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "outputs").symlink_to(tmp_path)
    assert folder_identity(run) == folder_identity(tmp_path / "outputs" / "run")
    moved = tmp_path / "copy"
    shutil.copytree(run, moved)
    assert folder_identity(moved) != folder_identity(run)


def test_the_record_is_readable_by_this_user_only(tmp_path: Path) -> None:
    record = tmp_path / "logs" / "processes.csv"
    record.parent.mkdir()
    record.write_text("left by an earlier run\n")
    record.chmod(0o644)
    procs = ProcessSet(record=record, watchdog=False)
    try:
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        assert record.read_text() == HEADER
    finally:
        procs.stop()
