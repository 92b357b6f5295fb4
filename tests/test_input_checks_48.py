"""Issue 48, item 8: small user mistakes that must be one clear line, refused up front.

Each test calls the check where that input is read (the command-line form of
each, with its exit code 2 and no run folder, is a case of tests/test_errors.py).
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest
import torch

from fedbench.errors import FedbenchError
from tests.analyze.folders import Device, make_folder


def _run(folder: Path) -> Path:
    rounds = {1: [Device("rpi4-000", "ok", 3.0, 1.0)], 2: [Device("rpi4-001", "ok", 3.0, 1.0)]}
    return make_folder(folder, rounds, {1: 0.5, 2: 0.6})


# --- 1. analyze out= an existing file ------------------------------------------------------


def test_analyze_out_a_file_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedbench.analyze.cli import main

    run = _run(tmp_path / "run")
    taken = tmp_path / "afile"
    taken.write_text("mine\n")
    assert main([str(run), f"out={taken}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"fedbench.analyze: error: out={taken}: a file, not a folder; give a folder"
    assert taken.read_text() == "mine\n"
    assert not (run / "figures").exists()


# --- 2. a header-only rounds.csv, NaN/inf accuracies ---------------------------------------


def test_a_header_only_rounds_csv_of_a_run_that_had_rounds_is_refused(tmp_path: Path) -> None:
    from fedbench.analyze.runs import load_run

    run = _run(tmp_path / "run")
    rounds = run / "rounds.csv"
    rounds.write_text(rounds.read_text().splitlines()[0] + "\n")
    with pytest.raises(FedbenchError) as exc:
        load_run(run)
    assert str(exc.value) == (
        f"{rounds}: holds only its header, but the run went to round 2 (summary.json, "
        "server_rounds.csv): its rows are missing; nothing to analyse"
    )


def test_an_infinite_accuracy_is_refused(tmp_path: Path) -> None:
    from fedbench.analyze.runs import load_run

    run = _run(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    summary["days"][1]["accuracy"] = math.inf
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(FedbenchError, match=r"summary.json: days\[1\].accuracy=inf: not an acc"):
        load_run(run)


def test_a_nan_accuracy_is_named_and_never_averaged_away(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedbench.analyze.runs import load_run

    run = _run(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    summary["days"][1]["accuracy"] = math.nan
    (run / "summary.json").write_text(json.dumps(summary))
    loaded = load_run(run)
    assert math.isnan(loaded.final_accuracy)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"[fedbench] warning: {run / 'summary.json'}: the accuracy of round 2 is NaN (the "
        "evaluation gave no number); no mean or target counts it (the tables show -)"
    ]


# --- 3. traces that are not regular files ---------------------------------------------------

KEY = "fleet.population.trace.availability"


def _read(path: Path) -> str:
    """read_table's refusal, from a thread: a FIFO must not block it."""
    from fedbench.population.traces import AVAILABILITY, read_table

    out: list[str] = []

    def read() -> None:
        try:
            read_table(path, KEY, AVAILABILITY)
        except FedbenchError as exc:
            out.append(str(exc))

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), f"reading {path} blocked"
    assert out, f"{path}: no refusal"
    return out[0]


def test_a_trace_that_is_a_folder(tmp_path: Path) -> None:
    assert (
        _read(tmp_path)
        == f"{KEY}={str(tmp_path)!r}: a folder, not a trace file; give a CSV or Parquet file"
    )


def test_a_trace_that_is_a_fifo_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    assert _read(fifo) == (
        f"{KEY}={str(fifo)!r}: a named pipe (FIFO), not a regular file; give a CSV or Parquet file"
    )


def test_a_trace_that_is_a_device_is_never_read() -> None:
    assert _read(Path("/dev/zero")) == (
        f"{KEY}='/dev/zero': a character device, not a regular file; give a CSV or Parquet file"
    )


def test_a_trace_that_is_a_symlink_loop(tmp_path: Path) -> None:
    loop = tmp_path / "trace.csv"
    loop.symlink_to(loop)
    assert _read(loop) == (
        f"{KEY}={str(loop)!r}: a loop of symbolic links that never reaches a file; "
        "give a CSV or Parquet file"
    )


def test_a_missing_trace_is_still_no_such_file(tmp_path: Path) -> None:
    assert _read(tmp_path / "none.csv").endswith(": no such file (a CSV or Parquet trace)")


# --- 4. gpus_per_worker without a GPU --------------------------------------------------------

SIMULATION = "fedbench.runtime.simulation.SimulationRuntime"


def _simulation(**params: object) -> object:
    from fedbench.experiment.target import Target

    return Target.from_config({"_target_": SIMULATION, **params}, "runtime").build()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a CUDA GPU")
def test_gpus_per_worker_on_a_host_without_a_gpu_is_refused() -> None:
    runtime = _simulation(gpus_per_worker=0.5)
    with pytest.raises(FedbenchError) as exc:
        runtime.preflight(None)  # type: ignore[attr-defined]
    assert str(exc.value).startswith("runtime.gpus_per_worker=0.5: this host has no CUDA GPU")


def test_gpus_per_worker_with_cpu_workers_is_refused() -> None:
    runtime = _simulation(gpus_per_worker=0.5, accelerator="cpu")
    with pytest.raises(FedbenchError, match=r"runtime.gpus_per_worker=0.5 with runtime.acc"):
        runtime.preflight(None)  # type: ignore[attr-defined]


def test_gpus_per_worker_joining_a_ray_cluster_is_the_clusters_business() -> None:
    _simulation(gpus_per_worker=0.5, ray_address="auto").preflight(None)  # type: ignore[attr-defined]


# --- 5. submodel rates -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        ([0.5, 0.5], "algorithm.rates=[0.5, 0.5]: 0.5 is given twice"),
        ([0.5, 1.0], "algorithm.rates=[0.5, 1.0]: not largest first; give distinct"),
    ],
)
def test_duplicate_or_unsorted_rates_are_refused(rates: list[float], expected: str) -> None:
    from fedbench.algorithms.heterofl import HeteroFL

    with pytest.raises(FedbenchError) as exc:
        HeteroFL(rates=rates)
    assert str(exc.value).startswith(expected), str(exc.value)
    assert "distinct width rates in (0, 1], largest first" in str(exc.value)
    assert str(exc.value).endswith(("e.g. [1.0, 0.5, 0.25]", ": algorithm.rates=[1.0, 0.5]"))


# --- 6. a deadline no device can meet --------------------------------------------------------


def test_a_deadline_below_a_millisecond_is_refused() -> None:
    from fedbench.server.close.deadline import Deadline

    with pytest.raises(FedbenchError) as exc:
        Deadline(1e-9)
    assert str(exc.value).startswith("round_close.deadline_s=1e-09: shorter than any round trip")
    assert ">= 0.001" in str(exc.value)
    assert Deadline(0.001).deadline_s == 0.001


# --- 7. pretraining numbers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lr", math.nan, "scenario.pretrain.lr=nan: must be a finite number > 0 and <= 1,000"),
        ("lr", 0.0, "scenario.pretrain.lr=0.0: must be a finite number > 0 and <= 1,000"),
        ("momentum", 1.0, "scenario.pretrain.momentum=1.0: must be a finite number >= 0 and < 1"),
        ("weight_decay", math.inf, "scenario.pretrain.weight_decay=inf: must be a finite"),
        ("epochs", -1, "scenario.pretrain.epochs=-1: must be an integer >= 0 and <= 100,000"),
        ("batch_size", 0, "scenario.pretrain.batch_size=0: must be an integer >= 1"),
        ("epochs", 1.5, "scenario.pretrain.epochs=1.5: must be an integer"),
    ],
)
def test_pretraining_numbers_are_checked(key: str, value: object, expected: str) -> None:
    from fedbench.scenarios.pretrain import PretrainParams

    with pytest.raises(FedbenchError) as exc:
        PretrainParams.from_config({key: value})
    assert str(exc.value).startswith(expected), str(exc.value)


# --- 8. bench batch_size beyond this host's memory -------------------------------------------


def test_bench_batch_size_larger_than_memory_names_the_batch() -> None:
    from fedbench.bench import workload_of

    with pytest.raises(FedbenchError) as exc:
        workload_of({"model": "lenet", "batch_size": str(10**9), "device": "rpi4"})
    message = str(exc.value)
    assert message.startswith("batch_size=1000000000: one batch of lenet's inputs"), message
    assert "choose batch_size 1.." in message and "input=" not in message


# --- 9. physical_keys given one path ---------------------------------------------------------


def test_physical_keys_may_be_one_path() -> None:
    from fedbench.runtime.deployment import DeploymentRuntime

    assert DeploymentRuntime(physical_keys="keys/pi.pub").physical_keys == ("keys/pi.pub",)  # type: ignore[arg-type]
    assert DeploymentRuntime(advertise="server.lan").advertise == ("server.lan",)  # type: ignore[arg-type]
    with pytest.raises(FedbenchError, match=r"runtime.physical_keys=5: a public key file"):
        DeploymentRuntime(physical_keys=5)  # type: ignore[arg-type]


# --- 10. an empty resume= --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_resume_is_refused(value: str) -> None:
    from fedbench.cli.gate import resume_folder

    with pytest.raises(FedbenchError) as exc:
        resume_folder(value)
    assert str(exc.value) == (
        "resume= is empty: give the run folder to continue, e.g. "
        "resume=outputs/2025-01-01/12-00-00 (or leave resume out for a new run)"
    )
    assert resume_folder(None) is None
    assert resume_folder("runs/a") == Path("runs/a")
