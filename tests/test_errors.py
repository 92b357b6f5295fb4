"""User mistakes get one clear line naming the value and the valid choices, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_fedbench

CASES = [
    (["experiment=nope"], ["experiment/nope", "daily_densenet"]),
    (["strategy=nope"], ["strategy/nope", "random"]),
    (["model=nope"], ["model/nope", "densenet40"]),
    (["data=nope"], ["data/nope", "digits", "cifar10"]),
    (
        ["strategy.clients_per_round=9"],
        ["clients_per_round=9 is larger than the fleet (4 devices)", "1..4"],
    ),
    (["strategy.clients_per_round=0"], ["clients_per_round must be a positive integer, got 0"]),
    (["scenario.days=0"], ["scenario.days must be a positive integer, got 0"]),
    (["scenario.days=-3"], ["scenario.days must be a positive integer, got -3"]),
    (
        ["scenario.new_samples_per_day=0"],
        ["scenario.new_samples_per_day must be a positive integer, got 0"],
    ),
    (["+scenario.colour=red"], ["scenario", "colour"]),
    (["fleet.devices.0.count=0"], ["fleet.devices[0].count=0: must be >= 1"]),
    (["train.lr=nan"], ["train.lr must be a finite number, got nan"]),
    (["algorithm=nope"], ["algorithm/nope", "fedprox"]),
    (["algorithm=fedprox", "+algorithm.mu=1"], ["algorithm.mu", "did you mean 'proximal_mu'"]),
    (["app=no/such/app"], ["app=no/such/app: neither a folder nor an importable module"]),
    (["seed=[1,2"], ["cannot read the override 'seed=[1,2'", "quote a value"]),
    (["hydra.run.dir=/proc/fedbench/run"], ["hydra.run.dir=/proc/fedbench/run: cannot create"]),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES, ids=[c[0][0] for c in CASES])
def test_bad_input_is_one_clear_error(
    overrides: list[str], expected: list[str], tmp_path: Path
) -> None:
    proc = run_fedbench(overrides, tmp_path / "run", timeout=120)
    assert proc.returncode != 0
    for text in expected:
        assert text in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_missing_cifar_names_the_data_root(tmp_path: Path) -> None:
    root = tmp_path / "no-cifar-here"
    proc = run_fedbench(
        ["data=cifar10", f"data.source.root={root}", "data.source.download=false"],
        tmp_path / "run",
        timeout=120,
    )
    assert proc.returncode == 2
    assert "data.source.root" in proc.stderr and str(root) in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("tpu", "runtime.accelerator='tpu': valid: auto, cpu, cuda, cuda:N"),
        ("cuda", "runtime.accelerator=cuda: torch sees no CUDA GPU on this host"),
    ],
)
def test_an_accelerator_this_host_lacks_never_makes_a_run_folder(
    value: str, expected: str, tmp_path: Path
) -> None:
    import torch

    if value == "cuda" and torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    run_dir = tmp_path / "run"
    proc = run_fedbench(["experiment=smoke", f"runtime.accelerator={value}"], run_dir, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in proc.stderr and "\n" not in proc.stderr.strip(), proc.stderr[-2000:]
    assert not run_dir.exists()
