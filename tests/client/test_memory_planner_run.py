"""A daily run where small-memory devices are `oom` without the memory planner and train with it.

Two real runs through Flower's simulation engine (tiny CNN, one day, batch
64 = one optimizer step per device), started side by side on a warm
workload cache: one with `train.memory_planner=off`, one with `auto`. The fleet is
fedbench/conf/fleet/small_memory.yaml's idea at test scale: the Raspberry Pi 3B+ and Honor 8
profiles with their training budget cut to 16 MB (the tiny CNN at batch 64
needs ~22 MB; the Honor 8 copy also loses half of it to other apps at night,
memory.pressure), and an unmodified Raspberry Pi 4.
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from flwr.app import ArrayRecord

from fedbench.core.meter import TrainJob
from fedbench.core.records import RoundReport
from fedbench.devices.budget import with_budget
from fedbench.devices.emulated_meter import EmulatedMeter
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import load_profile
from fedbench.models import build_model
from fedbench.paths import profiles_dir
from fedbench.train.planner import choose_plan
from tests.bad_inputs import _typed
from tests.helpers import client_report, run_client, train_message

TINY = {"rpi3bplus": (16, None), "honor8": (16, [[1, 6, 0.5]])}


def _tiny_profiles(folder: Path) -> list[Path]:
    paths = []
    for name, (budget, pressure) in TINY.items():
        data = yaml.safe_load((profiles_dir() / f"{name}.yaml").read_text())
        data["name"] = f"{name}_tiny"
        data["memory"]["train_budget_mb"] = budget
        data["sources"]["memory.train_budget_mb"] = "test: budget cut to 16 MB"
        if pressure:
            data["memory"]["pressure"] = pressure
            data["sources"]["memory.pressure"] = "test: other apps take half at night"
        path = folder / f"{name}_tiny.yaml"
        path.write_text(yaml.safe_dump(data))
        paths.append(path)
    return paths


def _command(run_dir: Path, profiles: list[Path], mode: str) -> list[str]:
    fleet = ",".join(f"{{profile:'{p}',count:1}}" for p in profiles)
    return [
        sys.executable,
        "-m",
        "fedbench",
        "experiment=smoke",
        f"fleet.devices=[{fleet},{{profile:rpi4,count:1}}]",
        "fleet.name=small_memory_test",
        "train.batch_size=64",
        f"train.memory_planner={mode}",
        "scenario.new_samples_per_day=64",
        "scenario.days=1",
        "scenario.pretrain.epochs=1",
        f"hydra.run.dir={run_dir}",
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, str]]]:
    root = tmp_path_factory.mktemp("memory_planner")
    profiles = _tiny_profiles(root)
    # Measure the plans once here (the runs share FEDBENCH_CACHE) rather than in both runs.
    model, shape = build_model("small_cnn")
    for budget in (16.0, 8.0):
        assert choose_plan(model, tuple(shape), 64, budget, model_name="small_cnn").feasible
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    procs = {
        mode: subprocess.Popen(
            _command(root / mode, profiles, mode),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )
        for mode in ("off", "auto")
    }
    rows = {}
    for mode, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        rows[mode] = list(csv.DictReader((root / mode / "rounds.csv").open()))
    return rows


def _by_profile(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {Path(r["profile"]).stem: r for r in rows}


@pytest.mark.slow
def test_small_devices_are_oom_without_the_planner(runs: dict[str, list[dict[str, str]]]) -> None:
    """Predicted out of memory in the full batch, the strategy never picks them."""
    off = _by_profile(runs["off"])
    assert set(off) == {"rpi4"}
    assert off["rpi4"]["status"] == "ok" and off["rpi4"]["plan"] == "bs64"


@pytest.mark.slow
def test_with_the_planner_they_train_and_show_the_plan(
    runs: dict[str, list[dict[str, str]]],
) -> None:
    auto = _by_profile(runs["auto"])
    assert {r["status"] for r in auto.values()} == {"ok"}
    assert auto["rpi4"]["plan"] == "bs64"  # fits: nothing changes for it
    for name in ("rpi3bplus_tiny", "honor8_tiny"):
        r = auto[name]
        assert r["plan"] != "bs64" and int(r["num_examples"]) == 64
        assert float(r["peak_mem_mb"]) <= float(r["mem_budget_mb"])
        assert math.isfinite(float(r["train_loss"]))
    # Less memory, more micro-batches: the Honor 8 copy has half the budget.
    assert auto["honor8_tiny"]["plan"] != auto["rpi3bplus_tiny"]["plan"]


@pytest.mark.slow
def test_the_plans_extra_latency_and_energy_are_in_the_records(
    runs: dict[str, list[dict[str, str]]],
) -> None:
    """The records carry the planned step's own cost, not the full batch's: recompute
    and smaller kernels cost compute, the micro-batches' smaller working set saves
    cache misses, so it lands within a modest factor either way (paper 004)."""
    model, shape = build_model("small_cnn")
    auto = _by_profile(runs["auto"])
    for name in ("rpi3bplus_tiny", "honor8_tiny"):
        r = auto[name]
        profile = with_budget(load_profile(profiles_dir() / f"{name[:-5]}.yaml"), 1e6)
        job = TrainJob("small_cnn", tuple(shape), (64,), 1, float(7200), None)
        full = EmulatedMeter(profile, Knobs()).emulate(model, job)
        assert full.status == "ok"
        for key, whole in (("latency_s", full.latency_s), ("energy_j", full.energy_j)):
            planned = float(r[key])
            assert planned != pytest.approx(whole, rel=1e-3)
            assert 0.7 * whole < planned < 2.0 * whole


def _client_report(profile: Path, mode: str) -> RoundReport:
    """One device's round through the ClientApp's training path (no Flower)."""
    overrides = [
        "experiment=smoke",
        f"fleet.devices=[{{profile:'{profile}',count:1}}]",
        "train.batch_size=64",
        f"train.memory_planner={mode}",
        "scenario.new_samples_per_day=64",
    ]
    experiment = _typed(overrides)
    model, _ = build_model("small_cnn")
    reply = run_client(train_message(experiment, 0, ArrayRecord(model.state_dict())))  # type: ignore[arg-type]
    return client_report(reply)


def test_client_round_off_is_oom_auto_trains(tmp_path: Path) -> None:
    rpi, honor = _tiny_profiles(tmp_path)
    off = _client_report(rpi, "off")
    assert off.status == "oom" and off.plan == "bs64" and off.num_examples == 0
    assert off.reason == "peak 22 MB > training budget 16 MB of rpi3bplus_tiny"
    auto = _client_report(rpi, "auto")
    assert auto.status == "ok" and auto.plan == "2x32" and auto.num_examples == 64
    assert auto.peak_mem_mb <= auto.mem_budget_mb == 16.0
    assert math.isfinite(auto.latency_s) and math.isfinite(auto.energy_j)
    pressed = _client_report(honor, "auto")  # 02:00: other apps leave 8 MB
    assert pressed.status == "ok" and pressed.mem_budget_mb == 8.0 and pressed.plan == "4x16"
    data = yaml.safe_load(honor.read_text())
    data["memory"]["pressure"] = [[1, 6, 0.01]]  # 0.16 MB: not even the weights
    starved = tmp_path / "starved" / honor.name  # another path: meters are cached per path
    starved.parent.mkdir()
    starved.write_text(yaml.safe_dump(data))
    none = _client_report(starved, "auto")
    assert none.status == "oom" and none.num_examples == 0
    assert none.reason == (
        "no memory plan fits: weights + gradients + optimizer state alone (0.391 MB) "
        "exceed the budget (0.16 MB)"
    )


def test_report_says_what_the_full_batch_would_need(tmp_path: Path) -> None:
    """A reduced plan's row carries the full batch's predicted peak; a full batch's is empty."""
    rpi, _ = _tiny_profiles(tmp_path)
    off = _client_report(rpi, "off")  # the full batch, costed: what it would need
    assert off.plan == "bs64" and math.isnan(off.plan_needed_mb)  # the planner is off
    auto = _client_report(rpi, "auto")
    assert auto.plan == "2x32" and auto.peak_mem_mb <= auto.mem_budget_mb == 16.0
    assert auto.plan_needed_mb == pytest.approx(off.peak_mem_mb, rel=1e-6)
    assert auto.plan_needed_mb > auto.mem_budget_mb
    roomy = _client_report(profiles_dir() / "rpi4.yaml", "auto")
    assert roomy.status == "ok" and roomy.plan == "bs64" and math.isnan(roomy.plan_needed_mb)
