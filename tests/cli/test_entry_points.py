"""Every entry point as a user types it: --help lists its keys and exits 0, a Hydra-style
override works, a typo is one line naming what would be valid (exit 2, no traceback); the
`fedbench` command is the same entry points under one name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.cli.main import COMMANDS
from fedbench.cli.main import main as fedbench
from tests.analyze.folders import emulated_rounds, make_folder

ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FEDBENCH_PROGRESS": "plain"}


def python_m(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300, env=ENV
    )


@pytest.mark.parametrize(
    ("module", "keys"),
    [
        ("fedbench.bench", ("device", "model", "batch_size", "plan", "sgd_momentum")),
        ("fedbench.characterize", ("study", "device", "out", "hydra.run.dir", "batch_sweep:")),
        ("fedbench.analyze", ("PATH...", "out", "target.NAME", "target_fraction", "0.95")),
        ("fedbench.device", ("superlink", "root_certificates", "issue-credentials")),
        ("fedbench.profile_device", ("models", "lenet,small_cnn", "holdout", "idle_s")),
    ],
)
def test_help_lists_the_keys_and_exits_0(module: str, keys: tuple[str, ...]) -> None:
    proc = python_m(module, "--help")
    assert proc.returncode == 0, proc.stderr
    for key in keys:
        assert key in proc.stdout, key
    assert "examples:" in proc.stdout and f"python -m {module}" in proc.stdout


def test_the_main_help_names_fedbenchs_groups_not_hydras_boilerplate() -> None:
    proc = python_m("fedbench", "--help")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "powered by Hydra" not in out and "characterize" not in out.split("Other commands")[0]
    for line in (
        "  fleet ",
        "edge_mixed",
        "host4*",
        "  strategy ",
        "heteroaware",
        "random*",
        "daily_densenet",
        "seed=0",
        "python -m fedbench experiment=daily_densenet",
    ):
        assert line in out, line
    # The composed config follows: the keys and their values.
    assert "clients_per_round: 2" in out


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (
            "fedbench.bench",
            ("device=rpi4", "model=lenet", "batch_sise=4"),
            "unknown key 'batch_sise' (did you mean 'batch_size'?)",
        ),
        (
            "fedbench.characterize",
            ("study=background", "device=rpi4", "modles=lenet"),
            "modles=...: not a parameter of background (did you mean 'models'?)",
        ),
        ("fedbench.analyze", (".", "targte=0.9"), "unknown key 'targte' (did you mean 'target'?)"),
        (
            "fedbench.device",
            ("superlnk=1.2.3.4:9092",),
            "unknown key 'superlnk' (did you mean 'superlink'?)",
        ),
        (
            "fedbench.profile_device",
            ("threds=1",),
            "unknown key 'threds' (did you mean 'threads'?)",
        ),
    ],
)
def test_a_typo_is_one_line_and_exit_2(module: str, args: tuple[str, ...], message: str) -> None:
    proc = python_m(module, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{module}: error: ") and message in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_the_main_command_with_an_override_and_with_a_typo() -> None:
    ok = python_m("fedbench", "--cfg", "job", "experiment=smoke", "scenario.days=1", "fleet=mixed8")
    assert ok.returncode == 0, ok.stderr
    assert "days: 1" in ok.stdout and "name: mixed8" in ok.stdout
    typo = python_m("fedbench", "experiment=smoke", "scenario.dayz=1")
    assert typo.returncode != 0 and "Traceback" not in typo.stderr
    assert "scenario.dayz" in typo.stderr


def test_overrides_in_the_hydra_style_on_the_other_entry_points(tmp_path: Path) -> None:
    bench = python_m("fedbench.bench", "device=rpi4", "model=lenet", "batch_size=4", "steps=2")
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["steps"] == 2
    # The main command's output-folder key works here too.
    study = python_m(
        "fedbench.characterize",
        "study=background",
        "device=rpi4",
        "models=small_cnn",
        "batch_size=4",
        f"hydra.run.dir={tmp_path / 'c'}",
    )
    assert study.returncode == 0, study.stderr
    assert (tmp_path / "c" / "background.csv").is_file()
    assert "[fedbench] background on rpi4: done," in study.stdout  # its progress, plainly
    run = make_folder(tmp_path / "run", emulated_rounds(), {0: 0.1, 3: 0.5})
    analysis = python_m("fedbench.analyze", str(run), "target=0.4", "formats=png")
    assert analysis.returncode == 0, analysis.stderr
    assert "| random | 1/1 |" in analysis.stdout
    keys = python_m("fedbench.device", "issue-credentials", f"out={tmp_path / 'k'}", "name=pi")
    assert keys.returncode == 0, keys.stderr
    assert (tmp_path / "k" / "pi.pub").is_file()


def test_the_fedbench_command_dispatches_to_the_same_entry_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert set(COMMANDS) == {
        *("run", "bench", "characterize", "analyze", "device", "fleet", "profile", "security")
    }
    assert fedbench(["bench", "device=rpi4", "model=lenet", "batch_size=4"]) == 0
    assert json.loads(capsys.readouterr().out)["device"] == "rpi4"
    assert fedbench(["profile", "--help"]) == 0
    assert "python -m fedbench.profile_device" in capsys.readouterr().out
    assert fedbench(["bench", "device=rpi4"]) == 2
    assert "missing model=" in capsys.readouterr().err
    assert fedbench(["analyse"]) == 2
    assert "did you mean 'analyze'" in capsys.readouterr().err
    # Every entry point of the README is one: fleet describe and security issue-tls too.
    assert fedbench(["fleet", "describe", "--help"]) == 0
    assert "usage: python -m fedbench.fleet describe" in capsys.readouterr().out
    assert fedbench(["security", "--help"]) == 0
    assert "python -m fedbench.security issue-tls" in capsys.readouterr().out
    script = Path(sys.executable).with_name("fedbench")
    if script.is_file():  # the installed console script
        proc = subprocess.run(
            [str(script), "run", "--help"], capture_output=True, text=True, timeout=120, env=ENV
        )
        assert proc.returncode == 0 and "Config groups" in proc.stdout
