"""The run folder's lock: held while the run lives, gone when it ends, never two holders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.report import lock as lock_module
from fedbench.report.lock import LOCK_FILE, RunLock


def test_the_lock_names_its_holder_and_is_removed_when_the_run_ends(tmp_path: Path) -> None:
    with RunLock(tmp_path) as held:
        assert held.held
        assert (tmp_path / LOCK_FILE).read_text().split()[0] == str(os.getpid())
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_killed_holder_leaves_a_file_the_next_run_can_take(tmp_path: Path) -> None:
    code = (
        "import sys, os, signal; from pathlib import Path; "
        "from fedbench.report.lock import RunLock; RunLock(Path(sys.argv[1])).acquire(); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=False)
    assert (tmp_path / LOCK_FILE).exists()  # SIGKILL: nobody removed it, the kernel dropped it
    with RunLock(tmp_path) as held:
        assert held.held


def test_a_file_replaced_while_being_locked_is_locked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter([False, True])  # the first file locked was removed by its holder
    monkeypatch.setattr(lock_module, "_same_file", lambda fd, path: next(answers))
    with RunLock(tmp_path) as held:
        assert held.held
    with pytest.raises(StopIteration):
        next(answers)  # both tries were made


def test_a_second_run_is_refused_while_the_first_holds_the_folder(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; "
        "from fedbench.report.lock import RunLock; RunLock(Path(sys.argv[1])).acquire(); "
        "print('held', flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = f"in use by another fedbench run \\(pid {holder.pid}"
        with pytest.raises(FedbenchError, match=refused):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
