"""One call in a forked child process: what the call does to its process ends with it.

A training call capped at a device's memory that runs out leaves the
process it ran in broken for every call after it. In the same process,
lifting RLIMIT_AS after the failure does not help: where the failing
allocation was oneDNN's (a primitive's JIT code or scratchpad), every later
convolution fails with `RuntimeError: could not create a primitive`; where
it was a thread's stack, GNU OpenMP ends the whole process ("Thread creation
failed"); and a cgroup over its cap has the kernel kill a process of the
group, the worker itself. So each capped call runs in a child forked for it:

- the parent (a simulation worker, a deployment's `flwr-clientapp`) forks;
  the child applies the device's limits to itself - torch threads, CPU
  affinity, membership of a fresh memory cgroup or RLIMIT_AS over its
  address space at that moment - runs the call, sends its value back
  pickled through a pipe and ends with `os._exit` (no exit handler of Ray
  or Flower runs in it);
- the parent learns how the call ended: it returned, it raised (type and
  message, and whether it was an allocation the cap refused), or its process
  died (and whether the kernel killed it at its cgroup's cap). The parent's
  own state is never touched: the next device gets a healthy worker.

Copy-on-write makes the fork cheap (the worker's model, data and caches are
there in the child without a copy) and the cgroup charges the child only for
what it touches: the call's own memory. What a child learns dies with it,
so before its next fork the parent imports the modules the previous child
had to import (imports were most of a cold child's time: 824 modules, ~15 s
on a 2-core host; a process that serves one call, a deployment's
`flwr-clientapp`, never pays for them twice), and callers warm their caches
in the parent before the fork (fedbench.client.caps.warm_up).

GNU OpenMP: a child forked from a process that has run a parallel region on
more than one thread waits for ever for that team in its first parallel
region. The parent therefore runs torch on one thread from its first
isolated call on (all the training happens in children), and a child whose
threads do not start within `TEAM_START_S` ends, saying so.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import importlib
import itertools
import os
import pickle
import resource
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TypeVar, cast

import torch

from fedbench.runtime.launch import die_with_parent
from fedbench.runtime.limits import MemoryGroups, remove_cgroup

T = TypeVar("T")
MB = 1 << 20
TEAM_START_S = 60.0  # a thread team that has not started by then never will
M_ARENA_MAX = -8  # glibc mallopt: at most this many malloc arenas
# The child writes this once its limits hold, then the pickled outcome.
_ENTERED = b"E"
# How close to its RLIMIT_AS a call must have come for an error that names no allocation
# to be the cap's: the largest single request a kernel library makes is of this order.
REACHED_SLACK = 32 * MB
_COUNT = itertools.count()


@dataclass(frozen=True)
class Limits:
    """What the child applies to itself before the call."""

    threads: int
    cpus: tuple[int, ...] = ()  # () leaves the affinity as inherited
    memory_mb: int | None = None  # None: no memory cap
    groups: MemoryGroups | None = None  # None with memory_mb: RLIMIT_AS

    def describe_memory(self) -> str:
        if self.memory_mb is None:
            return "no memory cap"
        if self.groups is not None:
            return self.groups.describe(self.memory_mb)
        return f"RLIMIT_AS {self.memory_mb} MB over the call's start"


class CallFailed(RuntimeError):
    """The isolated call returned nothing: it raised, or its process died."""

    def __init__(self, reason: str, out_of_memory: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.out_of_memory = out_of_memory


def out_of_memory(exc: BaseException) -> bool:
    """An allocation the OS (or the cap) refused."""
    if isinstance(exc, CallFailed):
        return exc.out_of_memory
    text = str(exc)
    return (
        isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text
    )


def run_isolated(call: Callable[[], T], limits: Limits) -> T:
    """`call()` in a child process under `limits`; its value, or CallFailed saying why not."""
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)  # this process never starts an OpenMP team (module docstring)
    _import_pending()
    group = None
    if limits.groups is not None and limits.memory_mb is not None:
        name = f"fedbench-call-{os.getpid()}-{next(_COUNT)}"
        group = limits.groups.create(name, limits.memory_mb)
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in (read_fd, write_fd):
            os.close(fd)
        if group is not None:
            remove_cgroup(group)
        raise CallFailed(f"this worker could not start the call's process: {exc}", False) from exc
    if pid == 0:
        os.close(read_fd)
        _child(call, limits, group, write_fd, parent)
    os.close(write_fd)
    reaped = False
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        reaped = True
        return _outcome(data, status, limits, group)  # type: ignore[return-value]
    finally:
        _PENDING.extend(_loaded(data if reaped else b"")[2])
        if not reaped:  # interrupted while the child runs: it must not outlive the call
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if group is not None:
            remove_cgroup(group)


def _child(
    call: Callable[[], object], limits: Limits, group: Path | None, fd: int, parent: int
) -> NoReturn:
    code = 0
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):  # not the parent's handlers (Flower's)
            signal.signal(sig, signal.SIG_DFL)
        die_with_parent(parent)
        with os.fdopen(fd, "wb") as pipe:
            start = _enter(limits, group)
            pipe.write(_ENTERED)
            pipe.flush()
            had = set(sys.modules)
            try:
                outcome: tuple[str, object] = ("returned", call())
            except BaseException as exc:  # noqa: BLE001 - the parent decides what it means
                traceback.print_exc()
                outcome = ("raised", _raised(exc, limits, group, start))
            imported = sorted(set(sys.modules) - had)
            try:
                data = pickle.dumps((*outcome, imported), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001 - an unpicklable value is the call's failure
                why = f"the call's value cannot be sent back from its process: {exc}"
                data = pickle.dumps(("raised", (why, False), imported))
            pipe.write(data)
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's code
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _enter(limits: Limits, group: Path | None) -> int:
    """Apply the limits to this (child) process; its address space after them, bytes."""
    # The collector would walk every object inherited from the worker, writing to each
    # one's header: a copy of every page holding one, charged to the call (54 MB measured
    # in a worker with torch loaded). Frozen, it walks only what the call creates.
    gc.freeze()
    if limits.cpus:
        os.sched_setaffinity(0, limits.cpus)
    torch.set_num_threads(limits.threads)
    # Start the OpenMP team now, so its threads (and their stacks) are not the call's; a
    # team that cannot start after fork ends this process with a traceback (docstring).
    faulthandler.dump_traceback_later(TEAM_START_S, exit=True)
    torch.ones(1 << 20).add_(1.0)
    faulthandler.cancel_dump_traceback_later()
    if group is not None and limits.groups is not None:
        limits.groups.join(group)
    start = _status_kb("VmSize") * 1024
    if limits.memory_mb is not None and group is None:
        _one_arena()  # a new thread's malloc arena would reserve 64 MB it never touches
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = start + limits.memory_mb * MB
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return start


def _raised(exc: BaseException, limits: Limits, group: Path | None, start: int) -> tuple[str, bool]:
    """(reason, out of memory) of an exception the call raised in the child."""
    reason = f"{type(exc).__name__}: {exc}"
    oom = out_of_memory(exc)
    if not oom and limits.memory_mb is not None and group is None:
        # A library that hides the failed allocation behind its own error (oneDNN's
        # "could not create a primitive"): out of memory if the call had reached its cap.
        used = _status_kb("VmPeak") * 1024 - start
        oom = used >= limits.memory_mb * MB - REACHED_SLACK
    if oom:
        reason = f"{reason} [{limits.describe_memory()}]"
    return reason, oom


def _loaded(data: bytes) -> tuple[str, object, list[str]]:
    """(kind, value, modules imported) the child sent; kind "died" if it sent none."""
    if not data.startswith(_ENTERED) or len(data) == len(_ENTERED):
        return "died", None, []
    try:
        kind, value, imported = pickle.loads(data[len(_ENTERED) :])
    except Exception:  # noqa: BLE001 - cut short: the process died while writing
        return "died", None, []
    return kind, value, imported


_PENDING: list[str] = []  # modules the last child imported, not imported here yet
_UNIMPORTABLE: set[str] = set()


def _import_pending() -> None:
    """Import here what the previous call imported, so the next child starts with it."""
    names, _PENDING[:] = list(_PENDING), []
    for name in names:
        if name in sys.modules or name in _UNIMPORTABLE:
            continue
        with contextlib.suppress(Exception):
            importlib.import_module(name)
        if name not in sys.modules:
            _UNIMPORTABLE.add(name)


def _outcome(data: bytes, status: int, limits: Limits, group: Path | None) -> object:
    kind, value, _ = _loaded(data)
    if kind == "returned":
        return value
    if kind == "raised":
        reason, oom = cast(tuple[str, bool], value)
        raise CallFailed(reason, oom)
    if group is not None and limits.groups is not None and limits.groups.oom_kills(group):
        peak = limits.groups.peak_mb(group)
        at = f", peak {peak:.0f} MB" if peak is not None else ""
        raise CallFailed(
            f"killed by the kernel at the device's memory cap ({limits.describe_memory()}{at})",
            True,
        )
    how = _ending(status)
    if not data.startswith(_ENTERED):
        raise CallFailed(
            f"the call's process {how} while taking the device's limits ({limits.threads} "
            f"torch threads, {limits.describe_memory()}): this worker's fault, not the device's",
            False,
        )
    raise CallFailed(f"the call's process {how} before it replied", False)


def _ending(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def _one_arena() -> None:
    import ctypes

    ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
