"""Run `python -m fedbench` as a user would, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_fedbench(
    args: list[str], run_dir: Path | None = None, timeout: float = 300, module: str = "fedbench"
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", module, *args]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=run_dir.parent if run_dir is not None else None,
    )
