"""The local SuperNodes of a deployment: one per emulated device, under its OS limits.

Each device of the fleet that is not a physical slot gets a node key, the
CPUs and memory cap of its profile (fedbench.runtime.limits), its own
FLWR_HOME (each SuperNode unpacks the app there) and its own local Runtime
API port, and runs `flower-supernode --node-config partition-id=<index>`
through the limits launcher. That Runtime API serves only the node's own
SuperExec (fedbench.runtime.superexec: each ClientApp's task token by file
descriptor, not on its command line), which holds the run's SuperExec
secret and is started beside it under the same limits (its ClientApps
inherit them).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from fedbench.core.device import DeviceSpec
from fedbench.devices.meters import make_meter
from fedbench.errors import FedbenchError
from fedbench.runtime.flower import free_port, node_superexec_argv, supernode_argv
from fedbench.runtime.limits import (
    NodeLimits,
    assign_cpus,
    cgroup_parent,
    host_cpus,
    make_cgroup,
    plan_memory,
)
from fedbench.security import NodeKey, issue_node_key


@dataclass(frozen=True)
class LocalNode:
    device: DeviceSpec
    key: NodeKey
    limits: NodeLimits
    home: Path  # the node's FLWR_HOME
    log: Path
    runtime_port: int  # its local Runtime API, on 127.0.0.1

    def argv(self, superlink: str, ca: Path, secret: Path) -> list[str]:
        node = supernode_argv(
            superlink,
            {"partition-id": self.device.index},
            self.runtime_port,
            root_certificates=ca,
            auth_key=self.key.private_key,
            superexec_secret=secret,
        )
        return [*self._launch(), "--", *node]

    def superexec_argv(self, secret: Path, node_pid: int) -> list[str]:
        """The node's SuperExec: ends with the node, runs its ClientApps under its limits."""
        return [*self._launch(), "--", *node_superexec_argv(self.runtime_port, secret, node_pid)]

    def _launch(self) -> list[str]:
        return [sys.executable, "-m", "fedbench.runtime.launch", *self.limits.launcher_args()]


def emulated(devices: Sequence[DeviceSpec]) -> list[DeviceSpec]:
    """The devices this host runs a SuperNode for (emulated ones, and the host itself)."""
    return [d for d in devices if not make_meter(d).remote]


def physical(devices: Sequence[DeviceSpec]) -> list[DeviceSpec]:
    """The devices that are their own machines and join over the network."""
    return [d for d in devices if make_meter(d).remote]


def plan_nodes(
    devices: Sequence[DeviceSpec],
    run_dir: Path,
    memory_limit: str,
    headroom_mb: int | None,
) -> list[LocalNode]:
    """Keys, limits and folders for every emulated device's SuperNode."""
    local = emulated(devices)
    # A node lives the whole run: the device's standing caps. A device without
    # caps (the host itself) gets all of this machine's cores and no memory cap.
    caps = [make_meter(d).caps() for d in local]
    host = host_cpus()
    cpus = assign_cpus([len(host) if c is None else c.cores for c in caps], host)
    parent = cgroup_parent() if memory_limit in ("auto", "cgroup") else None
    if memory_limit == "cgroup" and parent is None:
        raise FedbenchError(
            "runtime.memory_limit=cgroup: this process's cgroup v2 group is not writable or "
            "has no memory controller for children; valid here: auto, rlimit, none"
        )
    mode = "cgroup" if parent is not None else ("none" if memory_limit == "none" else "rlimit")
    nodes = []
    for d, cap, pinned in zip(local, caps, cpus, strict=True):
        budget = None if cap is None else int(cap.memory_mb)
        limits = NodeLimits(cpus=pinned if cap is not None else None, memory_mb=budget)
        if budget is not None and mode == "cgroup" and parent is not None:
            group = make_cgroup(parent, f"fedbench-{run_dir.name}-{d.name}", budget)
            limits = NodeLimits(limits.cpus, cgroup=group, memory_mb=budget)
        elif budget is not None and mode == "rlimit":
            limits = NodeLimits(
                limits.cpus,
                address_space_mb=plan_memory("rlimit", budget, headroom_mb),
                memory_mb=budget,
            )
        nodes.append(
            LocalNode(
                device=d,
                key=issue_node_key(run_dir / "credentials" / "nodes", d.name),
                limits=limits,
                home=run_dir / "flower" / "nodes" / d.name,
                log=run_dir / "logs" / f"node-{d.name}.log",
                runtime_port=free_port(),
            )
        )
    return nodes


def write_observed_limits(path: Path, started: Mapping[LocalNode, int]) -> None:
    """The limits each SuperNode process really runs under, read back from the OS."""
    rows = ["device,pid,cpus,rlimit_as_mb,cgroup"]
    for node, pid in started.items():
        try:
            cpus = ";".join(str(c) for c in sorted(os.sched_getaffinity(pid)))
            soft, _ = psutil.Process(pid).rlimit(psutil.RLIMIT_AS)
        except (OSError, psutil.Error):
            continue
        limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft >> 20)
        group = node.limits.cgroup.name if node.limits.cgroup is not None else ""
        rows.append(f"{node.device.name},{pid},{cpus},{limit},{group}")
    path.write_text("\n".join(rows) + "\n")
