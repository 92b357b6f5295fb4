"""The leftovers watchdog removes a dead session's private folder, and nothing else.

After a SIGKILL of the driver the watchdog (`python -m
fedbench.runtime.ray_leftovers TOKEN FOLDER`) ends the session's processes and
then removes its `fbray-*` folder, where Ray's files and the run's Ray token
were: that exact path only, only a directory of this account's, and never
through a link - a link in its place, or inside it, leaves its target alone.
tests/runtime/test_simulation_leftovers.py checks a real killed run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.runtime.ray_leftovers import remove_folder


def _session_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "fbray-abc123"
    (folder / "ray" / "session_1").mkdir(parents=True)
    (folder / "ray_auth_token").write_text("secret")
    return folder


def test_the_watchdog_removes_the_folder_when_the_driver_is_gone(tmp_path: Path) -> None:
    folder = _session_folder(tmp_path)
    # stdin at end-of-file at once: the driver is gone before it remembered anything.
    done = subprocess.run(
        [sys.executable, "-m", "fedbench.runtime.ray_leftovers", "nosuchtoken", str(folder)],
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert not os.path.lexists(folder)
    assert os.listdir(tmp_path) == []


def test_links_are_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("not the session's")
    folder = _session_folder(tmp_path)
    (folder / "ray" / "link").symlink_to(elsewhere)
    assert remove_folder(str(folder))
    assert not os.path.lexists(folder)
    assert (elsewhere / "keep").read_text() == "not the session's"

    link = tmp_path / "fbray-link"  # a link where the folder was: left, and its target
    link.symlink_to(elsewhere)
    assert not remove_folder(str(link))
    assert link.is_symlink() and (elsewhere / "keep").exists()


def test_only_a_session_folder_is_removed(tmp_path: Path) -> None:
    other = tmp_path / "not-a-session"
    other.mkdir()
    assert not remove_folder(str(other))
    assert other.is_dir()
    afile = tmp_path / "fbray-file"
    afile.write_text("x")
    assert not remove_folder(str(afile))
    assert afile.exists()
    assert not remove_folder(str(tmp_path / "fbray-missing"))


def test_another_accounts_folder_is_left(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("making a folder another account's needs root")
    folder = _session_folder(tmp_path)
    os.chown(folder, os.getuid() + 12345, -1)
    assert not remove_folder(str(folder))
    assert (folder / "ray_auth_token").exists()
