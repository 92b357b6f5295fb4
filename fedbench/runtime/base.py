"""What every runtime is: where devices run, and the limits the server waits within.

A runtime starts the processes (Ray workers, SuperLink and SuperNodes) that
run fedbench's Flower apps. The apps are the layer above (fedbench.server.app,
fedbench.client.app): the entry point hands them to `Runtime.run` as `Apps`,
and the server and the clients read the runtime's settings through
`build_runtime`.
"""

from __future__ import annotations

import functools
import math
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fedbench.errors import FedbenchError
from fedbench.experiment.build import built
from fedbench.train.accelerator import KEY, check, wants_cuda

if TYPE_CHECKING:
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp

    from fedbench.core.seating import Seating
    from fedbench.experiment.schema import Experiment


def check_reachable(address: str, key: str, hint: str, timeout_s: float = 5.0) -> None:
    """Refuse at once a HOST:PORT nothing answers on (clients would retry for ever)."""
    import socket

    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise FedbenchError(f"{key}={address!r}: expected HOST:PORT; {hint}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise FedbenchError(f"{key}={address}: nothing answers there ({why}); {hint}") from None


@dataclass(frozen=True)
class Apps:
    """The Flower apps a run runs: its ServerApp and fedbench's ClientApp.

    A runtime that runs them in its own process (simulation) takes these
    objects; one whose nodes load them from the app bundle (deployment)
    finds them there by name (fedbench.runtime.bundle).
    """

    server: ServerApp
    client: ClientApp


class Runtime(ABC):
    """A runtime's common settings; subclasses are frozen dataclasses built by `_target_`."""

    client_cpus: int  # torch threads (and logical CPUs) per client
    # torch threads of the server's own training and evaluation (pretraining, the
    # test split): fixed, so day 0 and every accuracy do not depend on the host's cores.
    server_threads: int = 1
    wait_for_nodes_s: float  # how long the server waits for its nodes before round 1
    round_timeout_s: float  # how long it waits for one round's replies
    # Workers apply each emulated device's real caps (threads, CPUs, memory) to its calls.
    enforce_caps: bool = False
    # Asynchronous FL orders arrivals on the host's clock (real devices), not the virtual one.
    wall_clock: bool = False
    # Where clients train: auto | cpu | cuda | cuda:N (fedbench.train.accelerator).
    accelerator: str = "auto"

    def check_common(self) -> None:
        for key in ("wait_for_nodes_s", "round_timeout_s"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FedbenchError(f"runtime.{key} must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise FedbenchError(f"runtime.{key}={value!r}: must be finite and > 0")
        for key in ("client_cpus", "server_threads"):
            cpus = getattr(self, key)
            if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
                raise FedbenchError(f"runtime.{key} must be a positive integer, got {cpus!r}")

    def check_accelerator(self) -> None:
        """`accelerator` spelled right, and not a GPU the caps cannot honour."""
        check(self.accelerator, KEY)
        if self.enforce_caps and wants_cuda(self.accelerator):
            raise FedbenchError(
                f"{KEY}={self.accelerator} with runtime.enforce_caps=true: a capped call runs "
                "in a process forked from its worker (fedbench.client.caps), where CUDA "
                f"cannot start; set {KEY}=cpu or auto (capped devices train on the CPU), "
                "or runtime.enforce_caps=false"
            )

    def worker_accelerator(self) -> str:
        """Where the workers train: `accelerator`, but the CPU under `enforce_caps`, whose
        calls are forked (CUDA cannot be used in a forked child) and emulate a device's
        CPU, threads and memory - none of which would bound a GPU."""
        return "cpu" if self.enforce_caps else self.accelerator

    def check_local_cpus(self) -> None:
        """A client cannot use more CPUs than this host has (a remote cluster checks its own)."""
        host = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if host and self.client_cpus > host:
            raise FedbenchError(
                f"runtime.client_cpus={self.client_cpus}: this host has {host} CPU(s); "
                f"choose 1..{host}"
            )

    def preflight(self, experiment: Experiment) -> None:  # noqa: B027 - optional hook
        """Checks that need the whole experiment, before anything starts."""

    @abstractmethod
    def run(self, experiment: Experiment, run_dir: Path, apps: Apps) -> None:
        """Run the experiment's `apps` to its end, leaving its results in `run_dir`."""

    def announced_names(self, run_dir: Path) -> dict[str, str]:
        """Physical device -> the name its registered key was issued for (none here)."""
        return {}

    @abstractmethod
    def seating(self, grid: Grid, experiment: Experiment, run_dir: Path) -> Seating:
        """Which node carries each device's messages (called by the ServerApp)."""


@functools.lru_cache(maxsize=8)
def build_runtime(experiment: Experiment) -> Runtime:
    """The experiment's runtime (`runtime=`), refused unless it is a fedbench Runtime."""
    return built(experiment.runtime, Runtime, "a fedbench runtime (fedbench.runtime)")
