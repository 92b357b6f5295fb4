"""Real OS limits for an emulated device's SuperNode: CPU affinity and a memory cap.

An emulated device gets as many host cores as it has cores, at most all of
the host's (`os.sched_setaffinity`), and a memory cap of its training
budget:

- `cgroup`: a cgroup v2 child of this process's cgroup with `memory.max`
  set to the budget (counts resident memory, the right measure), used when
  the cgroup v2 hierarchy is mounted and this process may create children
  with the memory controller enabled;
- `rlimit`: `RLIMIT_AS`, which counts *virtual* memory. A Python process
  with torch loaded reserves far more address space than it touches
  (shared libraries, thread stacks, allocator arenas), so the limit is the
  budget plus the address space of an idle client, measured once on this
  host (`idle_address_space_mb`) with `MALLOC_ARENA_MAX=2` set for the node
  so glibc does not reserve 64 MB per thread.

Limits are applied by a tiny launcher, `python -m fedbench.runtime.launch`,
that sets them on itself and then execs the SuperNode, so they are inherited
by everything the SuperNode starts (its helper and every `flwr-clientapp`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fedbench.errors import FedbenchError

MEMORY_MODES: tuple[str, ...] = ("auto", "cgroup", "rlimit", "none")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Flower's own threads (HTTP client, gRPC, log capture) on top of the measured
# idle client; their stacks are reserved address space, mostly untouched.
FLOWER_HEADROOM_MB = 512
ARENA_ENV = {"MALLOC_ARENA_MAX": "2"}


@dataclass(frozen=True)
class NodeLimits:
    """The limits one SuperNode runs under (None: not limited)."""

    cpus: tuple[int, ...] | None
    address_space_mb: int | None = None
    cgroup: Path | None = None  # cgroup v2 directory the node is moved into
    memory_mb: int | None = None  # the device's training budget behind either cap

    def launcher_args(self) -> list[str]:
        args: list[str] = []
        if self.cpus:
            args += ["--cpus", ",".join(str(c) for c in self.cpus)]
        if self.address_space_mb:
            args += ["--address-space-mb", str(self.address_space_mb)]
        if self.cgroup is not None:
            args += ["--cgroup", str(self.cgroup)]
        return args

    def describe(self) -> str:
        cpus = ",".join(map(str, self.cpus)) if self.cpus else "all"
        if self.cgroup is not None:
            mem = f"cgroup memory.max={self.memory_mb} MB"
        elif self.address_space_mb:
            mem = f"RLIMIT_AS={self.address_space_mb} MB (budget {self.memory_mb} MB)"
        else:
            mem = "no memory limit"
        return f"cpus {cpus}; {mem}"


def host_cpus() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def assign_cpus(cores: Sequence[int], host: Sequence[int]) -> list[tuple[int, ...]]:
    """Per device, min(its cores, host cores) host CPUs, dealt round-robin.

    Consecutive devices start where the previous one ended, so a fleet of
    single-core devices spreads over the host instead of piling on CPU 0.
    """
    if not host:
        raise FedbenchError("no host CPUs available to pin devices to")
    out: list[tuple[int, ...]] = []
    at = 0
    for n in cores:
        k = max(1, min(int(n), len(host)))
        out.append(tuple(sorted(host[(at + j) % len(host)] for j in range(k))))
        at = (at + k) % len(host)
    return out


def cgroup_parent(
    root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
) -> Path | None:
    """This process's cgroup v2 directory if children with a memory cap can be made there."""
    if not (root / "cgroup.controllers").is_file():
        return None  # not a (unified) cgroup v2 mount
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    if rel is None:
        return None
    parent = root / rel.lstrip("/")
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    if "memory" not in enabled or not os.access(parent, os.W_OK):
        return None
    return parent


def make_cgroup(parent: Path, name: str, memory_mb: int) -> Path:
    """A child cgroup capped at `memory_mb` of memory and no swap."""
    path = parent / name
    path.mkdir(exist_ok=True)
    (path / "memory.max").write_text(str(memory_mb * 1024 * 1024))
    swap = path / "memory.swap.max"
    if swap.exists():
        swap.write_text("0")
    return path


def remove_cgroup(path: Path) -> None:
    # A cgroup directory goes away with rmdir once its processes have exited.
    with contextlib.suppress(OSError):
        path.rmdir()


@dataclass(frozen=True)
class MemoryGroups:
    """Where this process may create memory-capped cgroups, and how that version spells it.

    cgroup v2 (`memory.max`, kills counted in `memory.events`) or the v1
    memory hierarchy (`memory.limit_in_bytes`, kills counted in
    `memory.oom_control`). Either caps what the group's processes keep
    resident - new pages and copy-on-write copies, not address space
    reserved and never touched - and over the cap the kernel reclaims what it
    can and then kills a process of the group with SIGKILL: an allocation
    never fails, the process ends.
    """

    parent: Path
    version: int  # 1 or 2

    def create(self, name: str, memory_mb: int) -> Path:
        """A child group capped at `memory_mb` resident, no swap."""
        if self.version == 2:
            return make_cgroup(self.parent, name, memory_mb)
        group = self.parent / name
        group.mkdir(exist_ok=True)
        limit = str(memory_mb * 1024 * 1024)
        (group / "memory.limit_in_bytes").write_text(limit)
        swap = group / "memory.memsw.limit_in_bytes"  # memory + swap; only with swap accounting
        if swap.exists():
            swap.write_text(limit)
        return group

    def join(self, group: Path) -> None:
        """Move the calling process into `group` (what it touches from now on is charged there)."""
        (group / "cgroup.procs").write_text(str(os.getpid()))

    def oom_kills(self, group: Path) -> int:
        """Processes of `group` the kernel killed for going over its cap."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            lines = (group / name).read_text().splitlines()
        except OSError:
            return 0
        counts = dict(line.split()[:2] for line in lines if len(line.split()) >= 2)
        return int(counts.get("oom_kill", 0))

    def peak_mb(self, group: Path) -> float | None:
        """The most `group` held resident at once (None where the kernel does not say)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((group / name).read_text().split()[0]) / (1024 * 1024)
        except (OSError, ValueError, IndexError):
            return None

    def describe(self, memory_mb: int) -> str:
        key = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        return f"cgroup v{self.version} {key}={memory_mb} MB"


def _v1_memory_mount(mounts: Path) -> Path | None:
    """Where the cgroup v1 memory controller is mounted (None: nowhere)."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and "memory" in fields[3].split(","):
            return Path(fields[1])
    return None


def memory_groups(
    root: Path = CGROUP_ROOT,
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    mounts: Path = Path("/proc/self/mounts"),
) -> MemoryGroups | None:
    """cgroup v2 if this process may cap children there, else v1's memory hierarchy, else None."""
    v2 = cgroup_parent(root, proc_cgroup)
    if v2 is not None:
        return MemoryGroups(v2, 2)
    mount = _v1_memory_mount(mounts)
    if mount is None:
        return None
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    # "4:memory:/some/group" (a v1 line names its controllers, comma-separated)
    rel = next(
        (line.split(":", 2)[2] for line in lines if "memory" in line.split(":", 2)[1].split(",")),
        None,
    )
    if rel is None:
        return None
    parent = mount / rel.lstrip("/")
    if not (parent / "memory.limit_in_bytes").is_file() or not os.access(parent, os.W_OK):
        return None
    return MemoryGroups(parent, 1)


@functools.lru_cache(maxsize=1)
def idle_address_space_mb() -> int:
    """Peak virtual size of a process that loaded the ClientApp and ran one tiny step."""
    code = (
        "import json, resource, torch\n"
        "import fedbench.client.app\n"
        "m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(),"
        " torch.nn.LazyLinear(10))\n"
        "m(torch.randn(2, 3, 32, 32)).sum().backward()\n"
        "peak = [int(l.split()[1]) for l in open('/proc/self/status')"
        " if l.startswith('VmPeak:')][0]\n"
        "print(json.dumps({'vm_peak_kb': peak}))\n"
    )
    env = {**os.environ, **ARENA_ENV}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(f"measuring an idle client's address space failed: {out.stderr[-500:]}")
    return int(json.loads(out.stdout.strip().splitlines()[-1])["vm_peak_kb"]) // 1024


def plan_memory(mode: str, budget_mb: int | None, headroom_mb: int | None) -> int | None:
    """RLIMIT_AS for a device with `budget_mb` (None: unlimited)."""
    if mode not in MEMORY_MODES:
        raise FedbenchError(f"runtime.memory_limit={mode!r}: valid: {', '.join(MEMORY_MODES)}")
    if mode == "none" or budget_mb is None:
        return None
    extra = headroom_mb if headroom_mb is not None else idle_address_space_mb() + FLOWER_HEADROOM_MB
    return int(budget_mb) + int(extra)
