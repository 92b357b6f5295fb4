"""`python -m fedbench.characterize` as a user runs it: files on success, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def characterize(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedbench.characterize", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_module_runs_a_study_into_its_folder(tmp_path: Path) -> None:
    proc = characterize(
        "study=background", "device=rpi4", "models=small_cnn", "batch_size=4", f"out={tmp_path}"
    )
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"background.csv", "background.png", "meta.json"}
    assert "small_cnn: background x1.11 slower" in proc.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, message in (
        (("study=batch_swep", "device=rpi4"), "did you mean 'batch_sweep'"),
        (("study=batch_sweep", "device=rpi44"), "did you mean 'rpi4'"),
        (("study=cpu_config", "device=rpi4", "models=dqn"), "not a parameter of cpu_config"),
    ):
        proc = characterize(*args, f"out={tmp_path}")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("fedbench.characterize: error: ") and message in proc.stderr
        assert "Traceback" not in proc.stderr
