"""OS limits of emulated devices' nodes and calls: CPU sets, RLIMIT_AS, cgroups, the launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.runtime.limits import (
    MemoryGroups,
    NodeLimits,
    assign_cpus,
    cgroup_parent,
    idle_address_space_mb,
    make_cgroup,
    memory_groups,
    plan_memory,
    remove_cgroup,
)


def test_each_device_gets_min_of_its_cores_and_the_hosts_spread_round_robin() -> None:
    assert assign_cpus([1, 1, 1], [0, 1]) == [(0,), (1,), (0,)]
    assert assign_cpus([8, 1], [0, 1]) == [(0, 1), (0,)]
    assert assign_cpus([2, 2], [0, 1, 2, 3, 4]) == [(0, 1), (2, 3)]
    assert assign_cpus([3], [4, 6]) == [(4, 6)]
    with pytest.raises(FedbenchError):
        assign_cpus([1], [])


def test_rlimit_is_the_budget_plus_the_headroom() -> None:
    assert plan_memory("rlimit", 3400, 1300) == 4700
    assert plan_memory("none", 3400, 1300) is None
    assert plan_memory("rlimit", None, 1300) is None
    with pytest.raises(FedbenchError, match="valid: auto, cgroup, rlimit, none"):
        plan_memory("ulimit", 100, 0)


def test_limits_become_launcher_arguments() -> None:
    limits = NodeLimits(cpus=(0, 1), address_space_mb=4700, memory_mb=3400)
    assert limits.launcher_args() == ["--cpus", "0,1", "--address-space-mb", "4700"]
    assert "RLIMIT_AS=4700 MB (budget 3400 MB)" in limits.describe()
    assert NodeLimits(cpus=None).launcher_args() == []


def _fake_cgroup_tree(tmp_path: Path, controllers: str, writable: bool = True) -> Path:
    root = tmp_path / "cgroup"
    group = root / "user.slice" / "me"
    group.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (group / "cgroup.subtree_control").write_text(controllers)
    (tmp_path / "self_cgroup").write_text("0::/user.slice/me\n")
    if not writable:
        group.chmod(0o500)
    return root


def test_cgroup_v2_parent_needs_the_memory_controller_for_children(tmp_path: Path) -> None:
    root = _fake_cgroup_tree(tmp_path, "cpu memory\n")
    parent = cgroup_parent(root, tmp_path / "self_cgroup")
    assert parent == root / "user.slice" / "me"
    group = make_cgroup(parent, "fedbench-run-rpi4-000", 3400)
    assert (group / "memory.max").read_text() == str(3400 * 1024 * 1024)
    remove_cgroup(group)  # a plain folder with files stays; cgroupfs would remove it
    empty = parent / "fedbench-empty"
    empty.mkdir()
    remove_cgroup(empty)
    assert not empty.exists()
    other = tmp_path / "other"
    other.mkdir()
    assert cgroup_parent(_fake_cgroup_tree(other, "cpu\n"), other / "self_cgroup") is None
    assert cgroup_parent(tmp_path / "nowhere", tmp_path / "self_cgroup") is None  # not v2


def _launch(args: list[str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedbench.runtime.launch", *args, "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_launcher_pins_cpus_and_caps_address_space() -> None:
    cpu = sorted(os.sched_getaffinity(0))[0]
    show = (
        "import json, os, resource;"
        "print(json.dumps([sorted(os.sched_getaffinity(0)),"
        " resource.getrlimit(resource.RLIMIT_AS)[0]]))"
    )
    out = _launch(["--cpus", str(cpu), "--address-space-mb", "900"], show)
    assert out.returncode == 0, out.stderr
    cpus, limit = json.loads(out.stdout)
    assert cpus == [cpu]
    assert limit == 900 * 1024 * 1024


def test_an_allocation_beyond_the_address_space_limit_fails() -> None:
    grab = "b = bytearray(1500 * 1024 * 1024)"
    assert _launch([], grab).returncode == 0  # fine without the limit
    capped = _launch(["--address-space-mb", "600"], grab)
    assert capped.returncode != 0
    assert "MemoryError" in capped.stderr


def test_idle_client_address_space_is_measured() -> None:
    # A process with torch and the ClientApp loaded reserves hundreds of MB
    # of address space it never touches: this is what RLIMIT_AS must allow.
    assert 200 < idle_address_space_mb() < 16_000


def _fake_v1(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A v1 memory hierarchy mounted at <tmp>/memory, this process in /box/me."""
    mount = tmp_path / "memory"
    group = mount / "box" / "me"
    group.mkdir(parents=True)
    (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (tmp_path / "mounts").write_text(
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n"
        f"cgroup {mount} cgroup rw,relatime,memory 0 0\n"
    )
    (tmp_path / "self_cgroup").write_text("4:memory:/box/me\n3:cpuset:/\n0::/\n")
    return tmp_path / "no-v2", tmp_path / "self_cgroup", tmp_path / "mounts"


def test_without_v2_the_v1_memory_hierarchy_caps_a_call(tmp_path: Path) -> None:
    root, self_cgroup, mounts = _fake_v1(tmp_path)
    groups = memory_groups(root, self_cgroup, mounts)
    assert groups == MemoryGroups(tmp_path / "memory" / "box" / "me", 1)
    group = groups.create("fedbench-call-1", 360)
    assert (group / "memory.limit_in_bytes").read_text() == str(360 * 1024 * 1024)
    assert groups.describe(360) == "cgroup v1 memory.limit_in_bytes=360 MB"
    assert groups.oom_kills(group) == 0  # no counter file: nothing killed
    (group / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (group / "memory.max_usage_in_bytes").write_text(str(360 * 1024 * 1024))
    assert groups.oom_kills(group) == 1 and groups.peak_mb(group) == 360.0
    (tmp_path / "self_cgroup").write_text("3:cpuset:/\n0::/\n")  # not in a memory group
    assert memory_groups(root, self_cgroup, mounts) is None


def test_v2_counts_its_kills_in_memory_events(tmp_path: Path) -> None:
    root = _fake_cgroup_tree(tmp_path, "cpu memory\n")
    groups = memory_groups(root, tmp_path / "self_cgroup", tmp_path / "no-mounts")
    assert groups is not None and groups.version == 2
    group = groups.create("fedbench-call-2", 100)
    assert (group / "memory.max").read_text() == str(100 * 1024 * 1024)
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    assert groups.oom_kills(group) == 1 and groups.peak_mb(group) is None
