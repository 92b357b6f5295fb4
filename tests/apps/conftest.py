"""The conformance apps' reference runs, shared by the test session's modules and workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def reference_runs_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each app's reference runs are kept for the session (shared_reference): one
    folder for every xdist worker of the session (their basetemps' parent, which is the
    session's own), so a run one module made is read back by the other wherever it runs."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "conformance-references"
