"""A device's real limits around one training call in a simulation worker.

Every call runs with `torch` threads set for the device. With
`runtime.enforce_caps=true` an emulated device's call also runs under its
profile's real caps, as the deployment's local SuperNodes do for a whole
node (fedbench.runtime.limits):

- threads: min(the device's cores - or `fleet.knobs.cores` - , the
  worker's `runtime.client_cpus`), pinned to that many of the worker's CPUs;
- memory: the device's training budget at the call's virtual time on top of
  what the idle worker already holds (its reservation, measured at the start
  of the call): a cgroup v2 `memory.max` where this process may create one,
  else `RLIMIT_AS` over the worker's current address space. A training that
  needs more than the device has fails for real - the allocator's error - and
  the device mod reports it as `oom` with the OS's words.

Workers serve devices of many profiles, so caps are set per call and lifted
after it; thermals stay emulated on the virtual clock.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import torch

from fedbench.client.seat import Seat
from fedbench.runtime.base import build_runtime
from fedbench.runtime.limits import cgroup_parent, make_cgroup

MB = 1 << 20


@contextlib.contextmanager
def capped(seat: Seat) -> Iterator[None]:
    runtime = build_runtime(seat.experiment)
    caps = seat.meter.caps(seat.task.now_s)
    if not runtime.enforce_caps or caps is None:
        torch.set_num_threads(runtime.client_cpus)
        yield
        return
    threads = max(1, min(caps.cores, runtime.client_cpus))
    allowed = sorted(os.sched_getaffinity(0))
    budget_mb = int(caps.memory_mb)
    with _pinned(allowed[:threads]), _memory(budget_mb, seat.device.profile):
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


@contextlib.contextmanager
def _pinned(cpus: list[int]) -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def _memory(budget_mb: int, profile: str) -> Iterator[None]:
    parent = cgroup_parent()
    if parent is not None:
        with _in_cgroup(parent, budget_mb, profile):
            yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + budget_mb * MB
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def _in_cgroup(parent: Path, budget_mb: int, profile: str) -> Iterator[None]:
    reservation = _resident() // MB
    name = f"fedbench-worker-{os.getpid()}-{Path(profile).stem}"
    group = make_cgroup(parent, name, budget_mb + reservation)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        (parent / "cgroup.procs").write_text(str(os.getpid()))  # back where it was


def _address_space() -> int:
    """Bytes of virtual address space this process holds now (VmSize)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _resident() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def out_of_memory(exc: BaseException) -> bool:
    """An allocation the OS (or the cap) refused."""
    text = str(exc)
    return (
        isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text
    )
