"""device=this: real timed steps in a worker process; what the host cannot measure is empty."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from fedbench.characterize import run_study
from fedbench.characterize.device import HostOptions, StepJob
from fedbench.characterize.host import HostDevice
from fedbench.characterize.hostcpu import capped, cpu_groups, freq_control, level_khz
from fedbench.characterize.models import ModelRef
from fedbench.characterize.output import number, read_csv
from fedbench.characterize.workloads import WorkloadBook
from fedbench.measure.probe import Probe

FAST = {"warmup": 1, "steps": 2, "threads": 1}


def has_power_sensor() -> bool:
    with Probe(0.01) as trace:
        pass
    return bool(trace.power_scopes)


def test_batch_sweep_on_this_host(tmp_path: Path) -> None:
    out = tmp_path / "bs"
    result = run_study(
        "batch_sweep", "this", {"models": "small_cnn", "batches": "1,8"}, out, HostOptions(**FAST)
    )
    rows = read_csv(result.csv)
    assert [r["kind"] for r in rows] == ["measured", "measured"]
    for r in rows:
        assert r["status"] == "ok"
        assert 0 < number(r["step_latency_s"]) < 10
        # Peak RSS growth covers at least the weights, gradients and momentum.
        assert number(r["peak_mem_mb"]) > 0
        assert number(r["mem_weights_mb"]) > 0 and number(r["mem_budget_mb"]) > 0
    energy = [r["energy_j"] for r in rows]
    if has_power_sensor():
        assert all(number(e) > 0 for e in energy)
    else:  # no sensor: empty, never 0
        assert energy == ["", ""] and rows[0]["avg_power_w"] == ""
    assert number(rows[1]["throughput_samples_s"]) == pytest.approx(
        8 / number(rows[1]["step_latency_s"]), rel=1e-4
    )


def test_op_breakdown_on_this_host(tmp_path: Path) -> None:
    result = run_study(
        "op_breakdown",
        "this",
        {"models": "small_cnn", "batch_size": "8"},
        tmp_path,
        HostOptions(**FAST),
    )
    rows = read_csv(result.csv)
    assert {r["status"] for r in rows} == {"ok"}
    assert sum(number(r["share"]) for r in rows) == pytest.approx(1.0, rel=1e-3)
    by_phase = {
        p: sum(number(r["time_s"]) for r in rows if r["phase"] == p)
        for p in ("forward", "backward")
    }
    assert by_phase["forward"] > 0 and by_phase["backward"] > 0
    dense = [r for r in rows if r["op_class"] == "dense" and r["phase"] in ("forward", "backward")]
    assert {r["phase"] for r in dense} == {"forward", "backward"}


def test_cpu_configs_without_clock_control_are_unavailable_not_faked() -> None:
    device = HostDevice(WorkloadBook(2), HostOptions(**FAST))
    configs = device.cpu_configs()
    cpus = len(os.sched_getaffinity(0))
    assert {c.cores for c in configs} >= {1, cpus}
    controllable = all(freq_control(c.cpus)[0] for c in configs)
    for c in configs:
        assert c.available == (controllable or c.level == "H")
    missing = [c for c in configs if not c.available]
    if missing:
        result = device.step(StepJob(ModelRef("small_cnn"), 2, missing[0]))
        assert (
            result.status == "unavailable"
            and "cpufreq" in result.reason
            or "writable" in result.reason
        )
        assert math.isnan(result.step_latency_s) and math.isnan(result.energy_j)


def fake_sysfs(root: Path, capacities: dict[int, int]) -> None:
    for i, (cpu, cap) in enumerate(capacities.items()):
        (root / f"cpu{cpu}").mkdir(parents=True)
        (root / f"cpu{cpu}" / "cpu_capacity").write_text(f"{cap}\n")
        policy = root / "cpufreq" / f"policy{i}"
        policy.mkdir(parents=True)
        (policy / "related_cpus").write_text(f"{cpu}\n")
        (policy / "scaling_available_frequencies").write_text("300000 1000000 1800000 2400000\n")
        (policy / "scaling_max_freq").write_text("2400000\n")


def test_big_little_groups_and_clock_caps_from_sysfs(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) != 2:
        pytest.skip("written for a process allowed on exactly two CPUs")
    big, little = allowed
    fake_sysfs(tmp_path, {big: 1024, little: 446})
    assert cpu_groups(tmp_path) == [
        ("big", (big,)),
        ("little", (little,)),
        ("hybrid", (big, little)),
    ]
    policies, why = freq_control((big,), tmp_path)
    assert why == "" and [p.cpus for p in policies] == [(big,)]
    assert [level_khz(policies[0], lv) for lv in "HML"] == [2400000, 1000000, 300000]
    max_file = policies[0].path / "scaling_max_freq"
    with capped(policies, "L") as ghz:
        assert ghz == 0.3 and max_file.read_text() == "300000"
    assert max_file.read_text().strip() == "2400000"  # restored
    none, why = freq_control((big,), tmp_path / "nowhere")
    assert none == [] and "no cpufreq policy" in why
    # Homogeneous CPUs are one group.
    (tmp_path / f"cpu{little}" / "cpu_capacity").write_text("1024\n")
    assert cpu_groups(tmp_path) == [("all", (big, little))]


def test_background_priority_on_this_host(tmp_path: Path) -> None:
    # Pinned to one CPU with a busy process there: at niceness 19 against it
    # Linux leaves training a few percent of the CPU, far below paper 002's 1/3.
    result = run_study(
        "background",
        "this",
        {"models": "small_cnn", "batch_size": "4"},
        tmp_path,
        HostOptions(warmup=1, steps=1, threads=1),
    )
    fg, bg = read_csv(result.csv)
    assert (fg["priority"], bg["priority"]) == ("foreground", "background")
    assert fg["status"] == bg["status"] == "ok"
    assert number(bg["slowdown"]) > 3
