"""Shared test set-up: a private cache, one torch thread, no telemetry."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked gpu run only where torch sees a CUDA GPU (CI is CPU-only)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch sees none)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Pretrained models and workload measurements go to a per-session folder
    # so tests neither read a developer's cache nor leave files behind.
    if "FEDBENCH_CACHE" not in os.environ:
        os.environ["FEDBENCH_CACHE"] = str(tmp_path_factory.mktemp("fedbench-cache"))
    # The per-user secret that keys checkpoints (fedbench.trust.key): one per session,
    # not the developer's ~/.config/fedbench/secret.
    if "FEDBENCH_SECRET_FILE" not in os.environ:
        os.environ["FEDBENCH_SECRET_FILE"] = str(tmp_path_factory.mktemp("fedbench-key") / "secret")
