"""runtime=simulation: Flower's simulation engine with the Ray backend, in-process.

The only module that calls Flower's (deprecated) `run_simulation`. It starts
a private Ray instance - or joins `ray_address` - with its session files in
a folder it owns, runs the ServerApp, and shuts Ray down again so no process
outlives the run. The private instance is this host's alone: every socket
of it listens on 127.0.0.1 (`loopback`), its folder is 0700
(`check_private`), and every one of its servers requires a token only this
run holds (Ray's token authentication, `fedbench.runtime.ray_auth`;
docs/security.md).

Devices are not nodes: the simulation has one virtual SuperNode per device
a round trains at once (the selector's clients_per_round x (1 + overcommit)),
and every train message names the device it is for (fedbench.protocol). Ray
runs those nodes' messages on as many workers as its CPUs allow
(`client_cpus` each), so a 100,000-device fleet starts like a 10-device one.

`accelerator` says where the workers train (fedbench.train.accelerator).
On CUDA each worker asks Ray for `gpus_per_worker` of a GPU (null: the
cluster's GPUs shared evenly by the workers), so several workers share one
GPU and a multi-GPU host or a Ray cluster's GPU nodes get workers on every
GPU; Ray sets each worker's CUDA_VISIBLE_DEVICES. `cuda:N` on a private
local cluster gives Ray GPU N only.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from flwr.serverapp import Grid

from fedbench.core import interrupt
from fedbench.core.seating import Seating
from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment
from fedbench.folders import check_folder
from fedbench.report.interrupted import mark_interrupted
from fedbench.runtime import ray_auth, ray_leftovers
from fedbench.runtime.base import Apps, Runtime, check_reachable
from fedbench.runtime.environ import scoped_environ
from fedbench.runtime.limits import ARENA_ENV
from fedbench.runtime.logs import route_flower_logs
from fedbench.runtime.seating import PooledSeating, wait_for_nodes
from fedbench.train.accelerator import (
    ACCELERATOR_ENV,
    check_host,
    gpu_index,
    gpu_share,
    host_gpus,
)
from strategies.base import build_selector


@dataclass(frozen=True)
class SimulationRuntime(Runtime):
    ray_address: str | None = None
    client_cpus: int = 1
    server_threads: int = 1
    ray_temp_dir: str | None = None
    wait_for_nodes_s: float = 120.0
    round_timeout_s: float = 3600.0
    enforce_caps: bool = False
    # Devices trained in one worker call when a round has more devices than workers;
    # null: as many as it takes for every worker to get four calls (runtime.seating).
    devices_per_call: int | None = None
    # Where workers train: auto | cpu | cuda | cuda:N (fedbench.train.accelerator).
    accelerator: str = "auto"
    # The GPU fraction each worker asks Ray for; null: the GPUs shared evenly by the workers.
    gpus_per_worker: float | None = None

    def __post_init__(self) -> None:
        self.check_common()
        n = self.devices_per_call
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise FedbenchError(f"runtime.devices_per_call must be >= 1 or null, got {n!r}")
        self.check_accelerator()
        g = self.gpus_per_worker
        if g is not None and (
            isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 1
        ):
            raise FedbenchError(
                f"runtime.gpus_per_worker={g!r}: a fraction of one GPU in (0, 1], or null"
            )

    def preflight(self, experiment: Experiment) -> None:
        if self.ray_temp_dir is not None:
            check_folder("runtime.ray_temp_dir", self.ray_temp_dir)
        if not self.ray_address:
            self.check_local_cpus()
            # A cluster's GPUs are its nodes': only a private local one is this host's.
            check_host(self.accelerator, "runtime.accelerator")
        elif gpu_index(self.accelerator) is not None:
            raise FedbenchError(
                f"runtime.accelerator={self.accelerator}: a Ray cluster's GPUs are Ray's to "
                "hand out; use cuda (a GPU per worker share) or auto"
            )
        elif self.ray_address != "auto":
            hint = "start the cluster (`ray start --head`) or set null for a private local one"
            check_reachable(self.ray_address, "runtime.ray_address", hint)
        self.check_gpu_share()  # after the accelerator's own checks: those name the cause

    def check_gpu_share(self) -> None:
        """Refuse a `gpus_per_worker` no worker would ask for, rather than ignore it.

        Workers ask Ray for a GPU share only when they train on CUDA: with
        `accelerator=cpu`, or `auto` on a private local cluster of a host torch
        sees no GPU on, the value would be dropped without a word. A joined Ray
        cluster's GPUs are its nodes', not this host's: there `auto` may use them.
        """
        share = self.gpus_per_worker
        if share is None:
            return
        key = f"runtime.gpus_per_worker={share:g}"
        if self.accelerator == "cpu":
            raise FedbenchError(
                f"{key} with runtime.accelerator=cpu: CPU workers ask for no GPU; set "
                "runtime.gpus_per_worker=null, or runtime.accelerator=auto or cuda"
            )
        if not self.ray_address and host_gpus() == 0:
            raise FedbenchError(
                f"{key}: this host has no CUDA GPU (torch sees none), so the workers "
                "train on the CPU and ask for no GPU; set runtime.gpus_per_worker=null, "
                "or join a Ray cluster with GPUs (runtime.ray_address)"
            )

    def nodes(self, experiment: Experiment) -> int:
        """Virtual SuperNodes: the devices one round trains at once."""
        return build_selector(experiment).wanted()

    def seating(self, grid: Grid, experiment: Experiment, run_dir: Path) -> Seating:
        # The simulation registers every virtual node before the ServerApp starts: the
        # pool is whatever is there (`nodes()` of them when fedbench started it; the
        # federation's size under `flwr run`).
        nodes = wait_for_nodes(grid, 1, self.wait_for_nodes_s)
        return PooledSeating(nodes, self.workers(), self.devices_per_call)

    def workers(self) -> int:
        """How many calls run at once: the cluster's CPUs over each client's."""
        import ray

        resources = ray.cluster_resources() if ray.is_initialized() else {}
        by_cpu = max(1, int(resources.get("CPU") or os.cpu_count() or 1) // self.client_cpus)
        share = self._gpu_share(float(resources.get("GPU", 0.0)), by_cpu)
        if share == 0:
            return by_cpu
        return max(1, min(by_cpu, math.floor(float(resources["GPU"]) / share + 1e-9)))

    def _session_env(self) -> dict[str, str]:
        """This process's environment during a session (scoped_environ): Ray's processes
        inherit it; after the session each name is as it was, so the next run in this
        process starts from the caller's environment."""
        env = {"RAY_DEDUP_LOGS": "0"}
        if self.enforce_caps:
            # Workers inherit it: glibc keeps 2 malloc arenas, not 64 MB per thread, so an
            # address-space cap measures what training allocates (fedbench.runtime.limits).
            env.update(ARENA_ENV)
        # Ray warns on every start about a future default we do not rely on (no GPUs);
        # a value of the user's stands.
        if ACCEL_OVERRIDE_ENV not in os.environ:
            env[ACCEL_OVERRIDE_ENV] = "0"
        if not self.ray_address:
            # Ray's local workers inherit the driver's environment: which GPUs Ray may hand
            # out (`cuda:N`: that one only, GPU 0 inside the workers) and where they train;
            # and that the private node is this host's alone (loopback()).
            env.update({**self._local_worker_env(), **LOOPBACK_ENV})
        return env

    def _local_worker_env(self) -> dict[str, str]:
        """What a private local cluster's workers inherit: their accelerator, and for
        `cuda:N` the one GPU Ray may give them."""
        index = gpu_index(self.accelerator)
        gpus = 1 if index is not None else host_gpus()
        env = {ACCELERATOR_ENV: "cuda" if self._gpu_share(gpus, 1) > 0 else "cpu"}
        if index is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(index)
        return env

    def _gpu_share(self, gpus: float, workers: int) -> float:
        # Capped workers train on the CPU (Runtime.worker_accelerator): they ask for no GPU.
        setting = self.worker_accelerator()
        return gpu_share(setting, int(gpus), workers, self.gpus_per_worker)

    def run(self, experiment: Experiment, run_dir: Path, apps: Apps) -> None:
        import ray
        from flwr.simulation import run_simulation

        verbose = experiment.verbose
        handler = route_flower_logs(run_dir, verbose)
        # Ray's session folder holds unix sockets whose paths must stay short
        # (~107 chars), so it lives under the system temp dir, not the run folder:
        # in a folder of ours, 0700, since Ray makes its own folders 0777 (check_private).
        own_tmp = self.ray_temp_dir is None
        private = (
            None
            if self.ray_address
            else tempfile.mkdtemp(prefix=ray_leftovers.FOLDER_PREFIX, dir=self.ray_temp_dir)
        )
        init: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": verbose,
            "logging_level": "INFO" if verbose else "ERROR",
        }
        if self.ray_address:
            init["address"] = self.ray_address
        else:
            assert private is not None
            init.update(
                num_cpus=os.cpu_count() or 1,
                _temp_dir=os.path.join(private, RAY_FOLDER),
                object_store_memory=512 * 1024**2,
            )
        # Till Ray is shut down: the first signal ends the run between rounds, a second
        # the process (fedbench.core.interrupt); signals_ask_to_stop is entered after
        # ray.init, whose own SIGTERM handler exits the process half-way.
        # A private session's processes carry a token (ray_leftovers): whatever of them
        # outlives ray.shutdown - or the driver's SIGKILL - is ended, none left behind.
        # And every one of them requires Ray's authentication token (ray_auth), read
        # from a file in our private folder: no other account can call them.
        # The environment Ray's processes inherit is set for the session only (_session_env).
        with contextlib.ExitStack() as signals:
            signals.enter_context(scoped_environ(self._session_env()))
            leftovers: ray_leftovers.Session | None = None
            if private is not None:
                # Should the driver die first, its watchdog also removes our folder (not
                # a ray_temp_dir's: that one is kept, as after a run that ends).
                mine = private if own_tmp else None
                leftovers = signals.enter_context(ray_leftovers.session(mine))
                signals.enter_context(ray_auth.private_token(private))
            try:
                if private is None:
                    ray.init(**init)
                else:
                    with loopback():
                        ray.init(**init)
                    check_private(private)
                    _stop_idle_services(keep_logs=verbose)
                    assert leftovers is not None
                    leftovers.remember()
                gpus = float(ray.cluster_resources().get("GPU", 0.0))
                if self.accelerator.startswith("cuda") and gpus == 0:
                    raise FedbenchError(
                        f"runtime.accelerator={self.accelerator}: the Ray cluster at "
                        f"{self.ray_address} has no GPU; use auto or cpu"
                    )
                share = self._gpu_share(gpus, self.workers())
                backend = {"client_resources": {"num_cpus": self.client_cpus, "num_gpus": share}}
                # A second signal waits for the run's ending (without it, marks the
                # summary), ends Ray's processes and removes our temp folder.
                remove = partial(shutil.rmtree, private, True) if own_tmp and private else None
                words = partial(mark_interrupted, run_dir)
                signals.enter_context(interrupt.signals_ask_to_stop(words, remove))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    run_simulation(
                        server_app=apps.server,
                        client_app=apps.client,
                        num_supernodes=self.nodes(experiment),
                        backend_config=backend,  # type: ignore[arg-type]
                        verbose_logging=verbose,
                    )
            finally:
                ray.shutdown()
                if leftovers is not None:
                    leftovers.end()
                if own_tmp and private is not None:
                    shutil.rmtree(private, ignore_errors=True)
                if handler is not None:
                    handler.close()


RAY_FOLDER = "ray"  # Ray's temp dir, inside our 0700 fbray-* folder
ACCEL_OVERRIDE_ENV = "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"
LOOPBACK = "127.0.0.1"
# Ray's own switch for a node of this host alone (its default on macOS and Windows): the
# node's address is then 127.0.0.1, and Ray's gRPC servers listen on 127.0.0.1 exactly
# when their node's address is 127.0.0.1. Workers and agents inherit it.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@contextlib.contextmanager
def loopback() -> Iterator[None]:
    """Within it, `ray.init` starts a private node on 127.0.0.1 only.

    Ray 2.x gives a node the host's outward address unless clusters are switched
    off (LOOPBACK_ENV), and its GCS, raylet, workers and actors then listen on
    every interface (`::`), its runtime-env agent on that address: open to the
    network, with no authentication. Ray reads the switch when it is imported,
    which may have happened before LOOPBACK_ENV was set: its value is set here too,
    for the `ray.init` only.
    """
    import ray._private.ray_constants as ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def check_private(folder: str) -> None:
    """After `ray.init` of a private node: it is on 127.0.0.1, its folders 0700.

    Ray makes its temp and session folders 0777 (its sockets and logs are in
    them); they sit inside `folder`, which fedbench made 0700, and are set 0700
    as well. A node on another address is refused rather than run open.
    """
    import ray

    address = ray.util.get_node_ip_address()
    if address != LOOPBACK:
        raise FedbenchError(
            f"Ray started the private simulation node on {address}, not {LOOPBACK}: its "
            "servers would listen on every interface, so fedbench stops here (is this Ray "
            "release supported?); runtime.ray_address joins a cluster on purpose"
        )
    os.chmod(folder, 0o700)
    for root, dirs, _ in os.walk(folder):  # no other account can reach in to plant a link
        for path in (os.path.join(root, name) for name in dirs):
            if not os.path.islink(path):  # session_latest
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)


def _stop_idle_services(keep_logs: bool) -> None:
    """Stop the processes of our private Ray node that a simulation never uses.

    `ray.init` always starts the autoscaler's monitor (a single-node local
    cluster never scales), the log monitor (it only forwards the workers'
    output to a driver that asked for it: `log_to_driver`, on when verbose)
    and, even with `include_dashboard=False`, the dashboard's API server (job
    submission and the state API, which fedbench does not use): 80-100 MB
    resident each. Measured with a /proc sampler on a 100,000-device run
    (2 rounds, loaded 2-core host): the process tree's peak fell by their sum,
    and the run ended as before. The raylet's agents stay: the raylet
    fate-shares with them. Killed through the node's own bookkeeping, so
    `ray.shutdown` does not look for them again.
    """
    import ray._private.worker as ray_worker

    node = ray_worker._global_node
    if node is None:
        return
    node.kill_monitor(check_alive=False)
    if not keep_logs:
        node.kill_log_monitor(check_alive=False)
    node.kill_dashboard(check_alive=False)
