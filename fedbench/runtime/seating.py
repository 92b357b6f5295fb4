"""The seatings of fedbench's runtimes (the interface is fedbench.core.seating.Seating).

In simulation devices are not nodes: a pool of virtual SuperNodes (one per
concurrent device of a round) serves whichever devices a round names, and
the message says which device it is. In deployment every emulated device is
its own SuperNode under the profile's OS limits and every physical device
is its own machine: a device's seat is the node registered with its key.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

from flwr.serverapp import Grid

from fedbench.core.seating import Seating
from fedbench.errors import FedbenchError


class PooledSeating(Seating):
    """Round-robin over a pool of worker nodes (simulation).

    With more devices in a round than `workers` can train at once, devices
    share calls: ceil(devices / (workers x CALLS_PER_WORKER)) per message, so
    the model crosses the wire once per call (`per_call` fixes it). Each worker
    gets several calls rather than one: the pool hands the next call to
    whichever worker is free, so a worker that drew the slow devices (a
    memory plan run in micro-batches, a larger partition, a batched group's
    first timing) does not hold the round while the others idle. Measured
    with 4 DenseNet40 devices on 2 workers (benchmarks/throughput.py's
    densenet workload, seed 0): with one call a worker, round 3's two calls
    of two same-plan boards were batched groups (timed, then trained in
    fedbench.train.batched), one worker idle for 7 s of the other's (13.8 s
    against 6.7 s for the round with one device a call); the rows are the same.
    """

    CALLS_PER_WORKER = 4

    def __init__(
        self, nodes: Sequence[int], workers: int | None = None, per_call: int | None = None
    ) -> None:
        if not nodes:
            raise FedbenchError("no worker nodes to run the fleet's devices on")
        self.nodes = sorted(nodes)
        self.workers = workers
        self.per_call = per_call

    def node_for(self, device: int, slot: int) -> int:
        return self.nodes[slot % len(self.nodes)]

    def devices_per_call(self, devices: int) -> int:
        if self.per_call is not None:
            return self.per_call
        calls = (self.workers or len(self.nodes)) * self.CALLS_PER_WORKER
        return max(1, math.ceil(devices / calls))


class FixedSeating(Seating):
    """Each device on the node registered for it (deployment)."""

    def __init__(self, node_of: Mapping[int, int]) -> None:
        self.node_of = dict(node_of)

    def node_for(self, device: int, slot: int) -> int:
        return self.node_of[device]


def wait_for_nodes(grid: Grid, count: int, timeout_s: float) -> list[int]:
    """The grid's node ids once at least `count` are connected (the server starts first)."""
    deadline = time.monotonic() + timeout_s
    while len(nodes := list(grid.get_node_ids())) < count:
        if time.monotonic() > deadline:
            raise FedbenchError(
                f"only {len(nodes)} of {count} nodes connected within "
                f"runtime.wait_for_nodes_s={timeout_s:g}s"
            )
        time.sleep(0.2)
    return nodes
