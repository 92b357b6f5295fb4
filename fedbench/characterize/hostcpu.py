"""This host's CPUs as paper 001's knobs: core groups, clock caps, a foreground load.

Core groups. CPUs this process may run on (sched_getaffinity) are grouped
by (cpu_capacity, cpuinfo_max_freq) from sysfs: on a big.LITTLE board the
groups differ, on a homogeneous host there is one group, "all", and no
little/hybrid rows.

Clocks. The high/medium/low levels cap `scaling_max_freq` of the cpufreq
policies covering the pinned CPUs, and restore it afterwards. That needs a
cpufreq interface and write permission; without them the medium and low
rows are reported as unavailable with the reason, and the high row runs at
whatever clock the governor chooses (no cap).

Foreground load. Paper 002's background training competes with the
user's foreground apps; on this host that competitor is one busy-loop
process per training CPU, pinned and niced as the study asks.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CPU_ROOT = Path("/sys/devices/system/cpu")


def allowed_cpus() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_groups(root: Path = CPU_ROOT) -> list[tuple[str, tuple[int, ...]]]:
    """big / little / hybrid CPU ids, or [("all", cpus)] when every CPU is alike."""
    keys: dict[tuple[int, int], list[int]] = {}
    for cpu in allowed_cpus():
        base = root / f"cpu{cpu}"
        capacity = _read_int(base / "cpu_capacity") or 0
        max_khz = _read_int(base / "cpufreq" / "cpuinfo_max_freq") or 0
        keys.setdefault((capacity, max_khz), []).append(cpu)
    ranked = [tuple(keys[k]) for k in sorted(keys, reverse=True)]
    if len(ranked) == 1:
        return [("all", ranked[0])]
    big = tuple(sorted(c for group in ranked[:-1] for c in group))
    return [("big", big), ("little", ranked[-1]), ("hybrid", tuple(sorted(big + ranked[-1])))]


@dataclass(frozen=True)
class FreqPolicy:
    path: Path  # .../cpufreq/policyN
    cpus: tuple[int, ...]
    khz: tuple[int, ...]  # available steps, increasing


def freq_policies(root: Path = CPU_ROOT) -> list[FreqPolicy]:
    out: list[FreqPolicy] = []
    for policy in sorted((root / "cpufreq").glob("policy*")):
        cpus = (policy / "related_cpus").read_text().split() if policy.is_dir() else []
        steps = _steps(policy)
        if cpus and steps:
            out.append(FreqPolicy(policy, tuple(int(c) for c in cpus), steps))
    return out


def _steps(policy: Path) -> tuple[int, ...]:
    try:
        listed = (policy / "scaling_available_frequencies").read_text().split()
        return tuple(sorted({int(x) for x in listed}))
    except (OSError, ValueError):
        lo = _read_int(policy / "cpuinfo_min_freq")
        hi = _read_int(policy / "cpuinfo_max_freq")
        return tuple(sorted({lo, hi})) if lo and hi else ()


def freq_control(cpus: tuple[int, ...], root: Path = CPU_ROOT) -> tuple[list[FreqPolicy], str]:
    """The policies covering `cpus` if their caps can be written, else ([], why not)."""
    policies = [p for p in freq_policies(root) if set(p.cpus) & set(cpus)]
    if not policies:
        return [], f"no cpufreq policy under {root / 'cpufreq'}: the clock cannot be set"
    locked = [p for p in policies if not os.access(p.path / "scaling_max_freq", os.W_OK)]
    if locked:
        return [], f"{locked[0].path / 'scaling_max_freq'} is not writable (needs root)"
    return policies, ""


def level_khz(policy: FreqPolicy, level: str) -> int:
    """H: top step, L: lowest step, M: the step nearest the middle of the range."""
    if level == "H":
        return policy.khz[-1]
    if level == "L":
        return policy.khz[0]
    middle = 0.5 * (policy.khz[0] + policy.khz[-1])
    return min(policy.khz, key=lambda k: abs(k - middle))


@contextlib.contextmanager
def capped(policies: list[FreqPolicy], level: str) -> Iterator[float]:
    """Cap every policy at `level` for the block; yields the cap in GHz (the highest)."""
    saved = [(p, (p.path / "scaling_max_freq").read_text().strip()) for p in policies]
    try:
        khz = [level_khz(p, level) for p in policies]
        for p, k in zip(policies, khz, strict=True):
            (p.path / "scaling_max_freq").write_text(str(k))
        yield max(khz) / 1e6
    finally:
        for p, text in saved:
            with contextlib.suppress(OSError):
                (p.path / "scaling_max_freq").write_text(text)


def _spin(cpu: int, nice: int, ready: Any) -> None:
    os.sched_setaffinity(0, {cpu})
    os.nice(nice)
    ready.set()
    while True:
        pass


@contextlib.contextmanager
def busy_load(cpus: tuple[int, ...], nice: int) -> Iterator[None]:
    """One busy-loop process per CPU at `nice` for the block (the foreground apps).

    The block starts once every process is pinned and spinning, so no
    measured step runs before the competition does.
    """
    ctx = mp.get_context("spawn")
    ready = [ctx.Event() for _ in cpus]
    procs = [
        ctx.Process(target=_spin, args=(cpu, nice, ev), daemon=True)
        for cpu, ev in zip(cpus, ready, strict=True)
    ]
    for p in procs:
        p.start()
    try:
        for ev in ready:
            if not ev.wait(timeout=120):
                raise RuntimeError("a busy-load process did not start within 120 s")
        yield
    finally:
        for p in procs:
            p.terminate()  # our own children, by their pid
        for p in procs:
            p.join(timeout=10)
