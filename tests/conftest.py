"""Shared test set-up: a private cache, one torch thread, no telemetry."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

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


# The slow tier's longest modules, in seconds run alone (docs/development.md's table, rounded).
# Under `-m slow` the two xdist workers take the longest module left first (longest
# processing time first): in pytest-xdist's own order (most tests first, then collection
# order) the long one-test deployment modules came last and one worker ran them alone.
# A module not listed here counts as short; listed ones only order the queue.
SLOW_SECONDS = {
    "tests/apps/test_conformance_fedbench.py": 300,
    "tests/e2e/test_caps_fleet.py": 200,
    "tests/apps/test_conformance_reference.py": 120,
    "tests/e2e/test_algorithms.py": 150,
    "tests/runtime/test_simulation_interrupt.py": 150,
    "tests/e2e/test_fedbuff_run.py": 130,
    "tests/runtime/test_deployment_signals.py": 110,
    "tests/e2e/test_resume.py": 100,
    "tests/runtime/test_deployment_kill.py": 100,
    "tests/runtime/test_deployment_secrets.py": 75,
    "tests/runtime/test_simulation_leftovers.py": 73,
    "tests/client/test_memory_planner_run.py": 70,
    "tests/runtime/test_deployment_app.py": 70,
    "tests/e2e/test_threads.py": 65,
    "tests/runtime/test_deployment.py": 63,
    "tests/e2e/test_faults.py": 60,
    "tests/runtime/test_ray_cluster.py": 48,
    "tests/analyze/test_sweep.py": 47,
    "tests/e2e/test_app.py": 47,
    "tests/characterize/test_daily_accuracy.py": 46,
}


class _LongestFirst(OrderedDict[str, Any]):
    """xdist's queue of modules, handing out the longest one left (SLOW_SECONDS) first."""

    def popitem(self, last: bool = True) -> tuple[str, Any]:
        if last or not self:
            return super().popitem(last)
        scope = max(self, key=lambda s: SLOW_SECONDS.get(s, 0))  # ties: xdist's order
        return scope, self.pop(scope)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The slow tier's loadscope queue, longest module first (SLOW_SECONDS)."""
    if config.getoption("dist") != "loadscope" or config.getoption("markexpr") != "slow":
        return None
    from xdist.scheduler import LoadScopeScheduling

    scheduler = LoadScopeScheduling(config, log)
    scheduler.workqueue = _LongestFirst()
    return scheduler


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
