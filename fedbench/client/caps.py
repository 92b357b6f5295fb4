"""A device's real limits around one call (`runtime.enforce_caps`).

Every call runs with `torch` threads set for the device. With
`runtime.enforce_caps=true` an emulated device's call runs under its
profile's real caps, in a process of its own (fedbench.client.isolated), so
a call that runs out of memory ends with its process and the next device
gets a healthy worker:

- threads: min(the device's training threads - its meter's `caps`: the
  profile's `framework.threads`, or `fleet.knobs.cores` - , the worker's
  `runtime.client_cpus`), one CPU each: pinned to that many of the
  worker's CPUs (spread over them by device index);
- memory: the device's training budget at the call's virtual time, for
  what the call touches beyond the worker it was forked from: a fresh
  cgroup (v2 `memory.max`, or v1 `memory.limit_in_bytes`) where this
  process may create one, else `RLIMIT_AS` over the call's address space at
  its start (fedbench.runtime.limits, docs/running.md "Real caps").

A training that needs more than the device has fails for real - the
allocator's error, or the kernel's OOM kill at the cgroup's cap - and the
device mod reports it `oom` with the OS's words and the cap's name. Thermals
stay emulated on the virtual clock.

The memory planner plans with predicted tensor bytes; the real process holds
more (allocator slack, kernels' scratch, the pages it writes). Where a
planned call (fedbench's own handler, `train.memory_planner=auto`) runs out
of its real cap, it is planned again for `REPLAN_SHARE` of what it was
planned for, in a fresh process, up to `REPLANS` times; the worker remembers
the share that fitted, so the device's next rounds start from it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

import torch
from flwr.app import Context

from fedbench.client.isolated import CallFailed, Limits, out_of_memory, run_isolated
from fedbench.client.seat import Seat
from fedbench.core.meter import Caps
from fedbench.runtime.base import build_runtime
from fedbench.runtime.limits import MemoryGroups, memory_groups

T = TypeVar("T")

__all__ = [
    "capped_call",
    "failure",
    "limits_for",
    "planning_share",
    "warm_up",
]

REPLAN_SHARE = 0.7  # of the budget planned for, after a real out-of-memory
REPLANS = 3
_SHARE: ContextVar[float] = ContextVar("fedbench_planning_share", default=1.0)
# (profile, budget MB, model, batch size) -> the share of the budget a plan fitted in, here
_FITTED: dict[tuple[str, int, str, int], float] = {}


_WARM_UPS: list[Callable[[Seat], object]] = []


def warm_up(prepare: Callable[[Seat], object]) -> Callable[[Seat], object]:
    """Register `prepare(seat)`, run in the worker before each capped call is forked.

    A child's caches die with it: what every child of a worker would build
    again (the data split, the model) is built once here instead, on one
    torch thread (fedbench.client.isolated: the worker never starts a team).
    """
    _WARM_UPS.append(prepare)
    return prepare


def planning_share() -> float:
    """The share of the device's budget the memory planner plans for in this call."""
    return _SHARE.get()


def limits_for(caps: Caps, client_cpus: int, device_index: int) -> Limits:
    """The call's threads, CPUs and memory cap on this host."""
    threads = max(1, min(caps.cores, client_cpus))
    allowed = sorted(os.sched_getaffinity(0))
    threads = min(threads, len(allowed))
    at = device_index * threads
    cpus = tuple(sorted(allowed[(at + k) % len(allowed)] for k in range(threads)))
    return Limits(threads, cpus, max(1, int(caps.memory_mb)), _groups())


@functools.lru_cache(maxsize=1)
def _groups() -> MemoryGroups | None:
    return memory_groups()


def capped_call(seat: Seat, context: Context, call: Callable[[], T], replan: bool = False) -> T:
    """`call()` for the seated device, under its caps when the experiment enforces them.

    Capped, it runs in a child process; what the handler left on the seat
    (its measured cost and loss) and in `context.state` comes back with it.
    `replan`: the call plans its memory through `planning_share()` (module
    docstring).
    """
    runtime = build_runtime(seat.experiment)
    # The device's cores and training budget now, its meter's to answer (None: not emulated).
    caps = seat.meter.caps(seat.task.now_s) if runtime.enforce_caps else None
    if caps is None:
        torch.set_num_threads(runtime.client_cpus)
        return call()
    limits = limits_for(caps, runtime.client_cpus, seat.device.index)
    torch.set_num_threads(1)  # the worker's own torch work (fedbench.client.isolated)
    for prepare in _WARM_UPS:
        prepare(seat)

    def child() -> tuple[T, object, object, object]:
        value = call()
        return value, seat.measured.cost, seat.measured.loss, context.state

    replan = replan and seat.experiment.train.memory_planner == "auto"
    key = (
        seat.device.profile,
        limits.memory_mb or 0,
        seat.experiment.model.name,
        seat.experiment.train.batch_size,
    )
    share = _FITTED.get(key, 1.0) if replan else 1.0
    for attempt in range(REPLANS + 1):
        token = _SHARE.set(share)
        try:
            value, cost, loss, state = run_isolated(child, limits)
        except CallFailed as exc:
            if not (replan and exc.out_of_memory and attempt < REPLANS):
                if share < 1.0:
                    exc.reason += f" (planned for {share:.0%} of the budget)"
                raise
            share *= REPLAN_SHARE
            continue
        finally:
            _SHARE.reset(token)
        if replan:
            _FITTED[key] = share
        seat.measured.cost, seat.measured.loss = cost, loss  # type: ignore[assignment]
        context.state = state  # type: ignore[assignment]
        return value
    raise AssertionError("unreachable: the last attempt returns or raises")


def failure(exc: BaseException) -> tuple[str, str]:
    """(status, reason) of a call that raised: `oom` where the device ran out of its memory."""
    reason = exc.reason if isinstance(exc, CallFailed) else f"{type(exc).__name__}: {exc}"
    return ("oom" if out_of_memory(exc) else "failed"), reason
