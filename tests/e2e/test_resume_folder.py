"""The run folder keeps its promises: resume from a kill at any point, never a row twice,
refuse a damaged rounds.csv.

The server is fedbench's own (`run_server`, real training) on an in-process
grid (tests/e2e/test_attack.py explains it); the kill is a real SIGKILL of a
forked server process at the worst moment the issue names: after round 1's
rows were written and before the first checkpoint.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.experiment.compose import compose_experiment
from fedbench.experiment.schema import Experiment
from fedbench.server import checkpoint
from fedbench.server.app import run_server
from tests.e2e.test_attack import Devices
from tests.helpers import task_identity
from tests.server.fakes import FakeGrid

pytestmark = pytest.mark.slow

NAMES = ["rpi4-000", "rpi4-001", "pixel2-000", "pixel2-001"]
HOST_DEPENDENT = ("node", "host_wall_s", "worker")  # worker: pid@host of the call


def _experiment(run_dir: Path, overrides: tuple[str, ...] = ()) -> Experiment:
    experiment = compose_experiment(
        [
            "experiment=smoke",
            "fleet.devices=[{profile:rpi4,count:2},{profile:pixel2,count:2}]",
            "strategy.clients_per_round=3",
            "scenario.days=3",
            "scenario.new_samples_per_day=24",
            "report.plots=false",
            *overrides,
        ]
    )
    return replace(experiment, output_dir=str(run_dir))


def _serve(run_dir: Path, overrides: tuple[str, ...] = ()) -> None:
    task_identity()
    devices = Devices(None, [])
    grid = FakeGrid({n: devices.device(n) for n in NAMES}, nodes=range(1, 5))
    run_server(grid, _experiment(run_dir, overrides), run_dir)


def _killed_before_first_checkpoint(run_dir: Path) -> None:
    def save_then_die(*args: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)  # round 1's rows are on disk, no checkpoint

    checkpoint.save = save_then_die  # type: ignore[assignment] # in the forked child only
    _serve(run_dir)


def _rows(run_dir: Path) -> list[dict[str, str]]:
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    return [{k: v for k, v in r.items() if k not in HOST_DEPENDENT} for r in rows]


def _killed_in_a_fork(serve: Callable[[Path], None], run_dir: Path) -> None:
    """Run `serve(run_dir)` in a forked child, which must end by SIGKILL."""
    child = multiprocessing.get_context("fork").Process(target=serve, args=(run_dir,))
    child.start()
    child.join(timeout=300)
    assert child.exitcode == -signal.SIGKILL


def test_a_kill_before_the_first_checkpoint_resumes_without_duplicates(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    _serve(straight)

    crashed = tmp_path / "crashed"
    _killed_in_a_fork(_killed_before_first_checkpoint, crashed)
    assert not (crashed / checkpoint.CHECKPOINT).exists()
    assert len(_rows(crashed)) == 3  # round 1's rows, then the kill

    _serve(crashed)  # what resume= runs: no checkpoint, so it starts over in place
    assert _rows(crashed) == _rows(straight)  # every round once, same figures
    aside = list(csv.DictReader((crashed / "rounds.interrupted-1.csv").open()))
    assert len(aside) == 3  # the killed attempt's rows, kept but not mixed in


HETEROFL = (
    "algorithm=heterofl",
    "algorithm.rate_policy=fixed",
    "algorithm.rate=0.5",
    "scenario.days=2",
)


def _killed_after_the_first_checkpoint(run_dir: Path) -> None:
    save = checkpoint.save

    def save_then_die(*args: object) -> None:
        save(*args)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGKILL)  # round 1 checkpointed, round 2 to come

    checkpoint.save = save_then_die  # type: ignore[assignment] # in the forked child only
    _serve(run_dir, HETEROFL)


def test_a_resumed_submodel_run_keeps_each_rates_accuracy(tmp_path: Path) -> None:
    # summary.json's accuracy per width rate, day by day, as an uninterrupted run has it:
    # the days before the kill come from the checkpoint (they were once only in memory).
    straight = tmp_path / "straight"
    _serve(straight, HETEROFL)
    crashed = tmp_path / "crashed"
    _killed_in_a_fork(_killed_after_the_first_checkpoint, crashed)
    assert checkpoint.load(crashed) is not None
    _serve(crashed, HETEROFL)  # resumes after round 1
    want = json.loads((straight / "summary.json").read_text())
    got = json.loads((crashed / "summary.json").read_text())
    assert got["accuracy_per_rate"] == want["accuracy_per_rate"]
    assert list(want["accuracy_per_rate"]) == ["0", "1", "2"]  # day 0: the initial model
    assert set(want["accuracy_per_rate"]["1"]) == {"1", "0.5", "0.25", "0.125", "0.0625"}
    assert got["final_accuracy_per_rate"] == want["accuracy_per_rate"]["2"]
    assert _rows(crashed) == _rows(straight)


def test_a_damaged_rounds_csv_is_refused_naming_the_first_bad_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _serve(run_dir)
    path = run_dir / "rounds.csv"
    good = path.read_bytes()
    lines = good.splitlines(keepends=True)
    assert len(lines) == 1 + 9

    path.write_bytes(b"".join(lines[:-2]))  # truncated: the last two rows gone
    with pytest.raises(FedbenchError, match=r"truncated: 8 line\(s\), .* first missing line 9"):
        _serve(run_dir)

    path.write_bytes(good.replace(lines[4], lines[4].replace(b",ok,", b",oom,")))
    with pytest.raises(FedbenchError, match=r"line 5 \(row 4\) differs"):
        _serve(run_dir)

    path.unlink()
    with pytest.raises(FedbenchError, match="missing, but the checkpoint recorded 9 row"):
        _serve(run_dir)
    assert not path.exists()  # refused before anything was written

    path.write_bytes(good)  # restored: the finished run resumes to its end again
    _serve(run_dir)
    assert path.read_bytes() == good
