"""A multirun sweep shows each job's overrides as it starts and ends with the comparison."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from fedbench.analyze.sweep import SweepProgress, job_count
from fedbench.report.progress import console
from tests.analyze.folders import emulated_rounds, make_folder


def test_job_count_is_the_product_of_the_sweeps() -> None:
    assert job_count(["strategy=random,oort,heteroaware", "seed=0,1", "fleet=mixed8"]) == 6
    assert job_count(["seed=range(0,4)"]) == 4
    assert job_count([], {"seed": "0,1"}) == 2
    assert job_count(["lr=interval(0.1,1.0)"]) is None  # a search space, not a grid


def config(sweep_dir: Path, num: int = 0, task: tuple[str, ...] = ()) -> object:
    return OmegaConf.create(
        {
            "hydra": {
                "sweep": {"dir": str(sweep_dir)},
                "sweeper": {"params": None},
                "overrides": {"task": list(task)},
                "job": {"num": num},
                "runtime": {"output_dir": str(sweep_dir / str(num))},
            }
        }
    )


def test_the_callback_announces_jobs_and_compares_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "multirun"
    callback = SweepProgress()
    callback.on_multirun_start(config(sweep, task=("strategy=random,oort",)))
    for num, strategy in enumerate(("random", "oort")):
        job = config(sweep, num, (f"strategy={strategy}",))
        callback.on_job_start(job)
        make_folder(
            sweep / str(num), emulated_rounds(), {0: 0.1, 3: 0.5 + num / 10}, strategy=strategy
        )
        callback.on_job_end(job, JobReturn(status=JobStatus.COMPLETED))
    callback.on_multirun_end(config(sweep))
    captured = capsys.readouterr()
    assert f"job 1/2: strategy=random -> {sweep / '0'}" in captured.out
    assert "job 2/2 completed in" in captured.out
    assert "| oort | 1/1 |" in captured.out  # the comparison table
    assert (sweep / "analysis" / "results.md").is_file()
    log = (sweep / "console.log").read_text()
    assert "job 2/2: strategy=oort" in log and "sweep of 2 runs" in log
    assert console.attached == []


@pytest.mark.slow
def test_a_real_multirun_prints_its_jobs_and_analyses_the_sweep(tmp_path: Path) -> None:
    sweep = tmp_path / "multirun"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbench",
            "-m",
            "experiment=smoke",
            "scenario.days=1",
            "strategy=random,oort",
            f"hydra.sweep.dir={sweep}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "FLWR_TELEMETRY_ENABLED": "0",
            "FEDBENCH_PROGRESS": "plain",
            "FEDBENCH_CACHE": str(tmp_path / "cache"),  # pretrain for real: its progress shows
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job 1/2: experiment=smoke scenario.days=1 strategy=random" in proc.stdout
    assert "job 2/2: experiment=smoke scenario.days=1 strategy=oort" in proc.stdout
    assert "pretraining small_cnn on" in proc.stdout
    assert "| oort | 1/1 |" in proc.stdout and "| random | 1/1 |" in proc.stdout
    for job in ("0", "1"):
        folder = sweep / job
        assert (folder / "console.log").read_text().count("[fedbench]") >= 5
        assert (folder / "figures" / "accuracy.png").is_file()
        assert (folder / "rounds_summary.csv").is_file()
    assert (sweep / "analysis" / "smoke_accuracy_vs_time.png").is_file()
