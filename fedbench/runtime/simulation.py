"""runtime=simulation: Flower's simulation engine with the Ray backend, in-process.

The only module that calls Flower's (deprecated) `run_simulation`. It starts
a private Ray instance - or joins `ray_address` - with its session files in
a folder it owns, runs the ServerApp against one virtual SuperNode per
device, and shuts Ray down again so no process outlives the run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError
from fedbench.fleet import expand_fleet
from fedbench.runtime.logs import route_flower_logs


@dataclass(frozen=True)
class SimulationRuntime:
    ray_address: str | None = None
    client_cpus: int = 1
    ray_temp_dir: str | None = None
    wait_for_nodes_s: float = 120.0
    round_timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.client_cpus, bool)
            or not isinstance(self.client_cpus, int)
            or (self.client_cpus < 1)
        ):
            raise FedbenchError(
                f"runtime.client_cpus must be a positive integer, got {self.client_cpus!r}"
            )

    def run(self, experiment: dict[str, Any], run_dir: Path, verbose: bool) -> None:
        import ray
        from flwr.simulation import run_simulation

        from fedbench.app.client_app import app as client_app
        from fedbench.app.server_app import make_server_app

        num_nodes = len(expand_fleet(experiment["fleet"]))
        handler = route_flower_logs(run_dir, verbose)
        # Ray's session folder holds unix sockets whose paths must stay short
        # (~107 chars), so it lives under the system temp dir, not the run folder.
        own_tmp = self.ray_temp_dir is None
        temp_dir = self.ray_temp_dir or tempfile.mkdtemp(prefix="fbray-")
        init: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": verbose,
            "logging_level": "INFO" if verbose else "ERROR",
        }
        if self.ray_address:
            init["address"] = self.ray_address
        else:
            init.update(
                num_cpus=os.cpu_count() or 1, _temp_dir=temp_dir, object_store_memory=512 * 1024**2
            )
        os.environ["RAY_DEDUP_LOGS"] = "0"
        # Ray warns on every start about a future default we do not rely on (no GPUs).
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        try:
            ray.init(**init)
            backend = {"client_resources": {"num_cpus": self.client_cpus, "num_gpus": 0.0}}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_simulation(
                    server_app=make_server_app(experiment),
                    client_app=client_app,
                    num_supernodes=num_nodes,
                    backend_config=backend,  # type: ignore[arg-type]
                    verbose_logging=verbose,
                )
        finally:
            ray.shutdown()
            if own_tmp:
                shutil.rmtree(temp_dir, ignore_errors=True)
            if handler is not None:
                handler.close()
