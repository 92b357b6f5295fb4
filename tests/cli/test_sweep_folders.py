"""The gate checks each sweep job in the folder Hydra gives it, whatever hydra.sweep.subdir says.

It used to take the job's number for the folder, so a sweep whose folders are
named by seed (`hydra.sweep.subdir=${seed}`, experiments/heterogeneous_models/run.sh)
was refused for seed 1 because folder 0 - seed 0's, from an earlier sweep - held a run.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_fedbench


def _folders(args: list[str]) -> list[str]:
    proc = run_fedbench(["-m", "experiment=smoke", *args, "dry_run=true"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line.rsplit(" ", 1)[1] for line in proc.stdout.splitlines() if "would write" in line]


def test_each_job_is_checked_in_the_folder_its_subdir_names(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    assert _folders(["seed=1,3", f"hydra.sweep.dir={sweep}"]) == [f"{sweep}/0", f"{sweep}/1"]
    by_seed = ["seed=1,3", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=s${seed}"]
    assert _folders(by_seed) == [f"{sweep}/s1", f"{sweep}/s3"]


def test_a_finished_run_in_another_jobs_folder_does_not_refuse_the_sweep(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    done = sweep / "0"  # seed 0's run, from an earlier sweep
    done.mkdir(parents=True)
    (done / "rounds.csv").write_text("round\n1\n")
    by_seed = [f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${seed}"]
    assert _folders(["seed=1", *by_seed]) == [f"{sweep}/1"]
    proc = run_fedbench(["-m", "experiment=smoke", "seed=0", *by_seed, "dry_run=true"])
    assert proc.returncode == 2 and f"run folder {done} already holds a run" in proc.stderr
