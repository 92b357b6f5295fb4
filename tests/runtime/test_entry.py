"""Flower's processes run with fedbench's own interpreter, never a script PATH finds
(fedbench.runtime.entry): a venv made with --system-site-packages has the system's
Flower scripts on PATH, which ran the system's fedbench."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.runtime import entry, flower, superexec


def _decoy_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    decoy = tmp_path / name
    decoy.write_text("#!/bin/sh\necho decoy\n")
    decoy.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path(sys.executable).parent}:/usr/bin:/bin")


def test_a_flower_script_on_path_is_not_what_runs(tmp_path, monkeypatch) -> None:
    for name in ("flower-supernode", "flwr-serverapp", "flwr-clientapp"):
        _decoy_on_path(tmp_path, monkeypatch, name)
        assert entry.argv(name) == [sys.executable, "-m", entry.MODULE, name]
    assert flower.tool("flower-supernode")[:3] == [sys.executable, "-m", entry.MODULE]
    assert superexec.command("flwr-serverapp")[0] == sys.executable


def test_the_launcher_runs_the_installed_script_with_its_arguments() -> None:
    done = subprocess.run(
        [*entry.argv("flwr-serverapp"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "usage: flwr-serverapp" in done.stdout  # argv[0] is the script's own name


def test_an_unknown_script_is_a_clear_error() -> None:
    with pytest.raises(FedbenchError, match="'flower-nope' not found; install Flower"):
        flower.tool("flower-nope")
    done = subprocess.run(
        [sys.executable, "-m", entry.MODULE, "flower-nope"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "no console script 'flower-nope'" in done.stderr
