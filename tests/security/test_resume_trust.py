"""`resume=` trusts nothing in a run folder: its config names only allowed targets, its
checkpoint carries this user's HMAC (or is accepted explicitly) and agrees with its rows.

The folder is a real one: fedbench's own server (real training) on an in-process
grid, as tests/e2e/test_resume_folder.py runs it. Each test edits a copy the way
an attacker without this user's key would, and resumes it.
"""

from __future__ import annotations

import io
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from fedbench.errors import FedbenchError
from fedbench.report.integrity import RowsIntegrity
from fedbench.resume import resumed_experiment
from fedbench.server import checkpoint
from tests.e2e.test_resume_folder import _experiment, _serve
from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("served") / "run"
    _serve(run_dir)  # 3 rounds, a checkpoint after each
    config = yaml.safe_dump(_experiment(run_dir).to_config(), sort_keys=False)
    (run_dir / "config.yaml").write_text(config)
    return run_dir


@pytest.fixture
def folder(served: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(served, copy)
    return copy


# --- what an attacker can do: read the checkpoint, change it, write it back ------------------


def _fields(folder: Path) -> dict[str, Any]:
    data = (folder / checkpoint.CHECKPOINT).read_bytes()
    if data.startswith(b"fedbench-checkpoint"):
        data = data.split(b"\n", 3)[3]  # the body after the keyed header
    raw = torch.load(io.BytesIO(data), weights_only=True)
    return {k: (v if k == "format" else checkpoint.decode(v)) for k, v in raw.items()}


def _write_unkeyed(folder: Path, fields: dict[str, Any]) -> None:
    """The checkpoint as plain torch.save, as a hand (or a script without the key) writes it."""
    data = {k: (v if k == "format" else checkpoint.encode(v)) for k, v in fields.items()}
    torch.save(data, folder / checkpoint.CHECKPOINT)


def _write_under_another_key(
    folder: Path, fields: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint written by fedbench under another account's secret."""
    mine = os.environ["FEDBENCH_SECRET_FILE"]
    monkeypatch.setenv("FEDBENCH_SECRET_FILE", str(tmp_path / "their-secret"))
    ckpt = checkpoint.Checkpoint(**{k: v for k, v in fields.items() if k != "format"})
    checkpoint.save(folder, ckpt)
    monkeypatch.setenv("FEDBENCH_SECRET_FILE", mine)


def _refused(folder: Path, untrusted: bool = False) -> str:
    """The one line the driver refuses the folder with (and the server refuses it too)."""
    with pytest.raises(FedbenchError) as driver:
        if untrusted:
            resumed_experiment(folder, None, (), True)
        else:
            resumed_experiment(folder, None)
    if not untrusted:
        with pytest.raises(FedbenchError):
            checkpoint.load(folder)
    message = str(driver.value)
    assert "\n" not in message
    return message


# --- the keyed fingerprint --------------------------------------------------------------------


def test_an_untouched_folder_resumes(folder: Path) -> None:
    experiment = resumed_experiment(folder, None)
    assert experiment.output_dir == str(folder)
    back = checkpoint.load(folder)
    assert back is not None and back.round == 3


def test_rows_forged_with_the_fingerprint_recomputed_are_refused(folder: Path) -> None:
    rows = folder / "rounds.csv"
    lines = rows.read_text().splitlines(keepends=True)
    cells = lines[1].split(",")
    cells[9] = "0.001"  # latency_s: a device that was fast
    lines[1] = ",".join(cells)
    rows.write_text("".join(lines))
    fields = _fields(folder)
    size = rows.stat().st_size
    fields["writer"] = {
        **fields["writer"],
        "csv_bytes": size,
        "integrity": RowsIntegrity(rows).advance(size),
    }
    _write_unkeyed(folder, fields)
    assert "cannot verify it" in _refused(folder)


def test_another_accounts_checkpoint_is_refused_unless_accepted_explicitly(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(checkpoint.ACCEPTED_ENV, raising=False)
    _write_under_another_key(folder, _fields(folder), tmp_path, monkeypatch)
    message = _refused(folder)
    assert "another account's fedbench key" in message and "resume_untrusted=true" in message
    # Accepted explicitly: the content is checked, then the server reads exactly those bytes.
    resumed_experiment(folder, None, (), True)
    assert os.environ[checkpoint.ACCEPTED_ENV]
    back = checkpoint.load(folder)
    assert back is not None and back.round == 3


def _nan_model(f: dict[str, Any]) -> None:
    name = next(iter(f["arrays"]))
    f["arrays"][name] = torch.full_like(f["arrays"][name], math.nan)


def _round_99_clock_1e12(f: dict[str, Any]) -> None:
    f["round"], f["now_s"] = 99, 1e12


def _clock_1e12(f: dict[str, Any]) -> None:
    f["now_s"] = 1e12


def _forged_accuracy(f: dict[str, Any]) -> None:
    f["writer"]["days"][-1]["accuracy"] = 0.999


def _impossible_accuracy(f: dict[str, Any]) -> None:
    f["writer"]["days"][-1]["accuracy"] = 7.0


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_nan_model, "holds NaN or infinite values"),
        (_round_99_clock_1e12, r"round 99, but this experiment has rounds 1\.\.3"),
        (_clock_1e12, r"clock 1e\+12 s after round 3, but server_rounds.csv ended"),
        (_forged_accuracy, "accuracy 0.999 after round 3, but summary.json recorded"),
        (_impossible_accuracy, r"accuracy 7.0 after round 3 is not in \[0, 1\]"),
    ],
)
def test_an_edited_checkpoint_is_refused_keyed_or_not(
    folder: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    edit: Callable[[dict[str, Any]], None],
    why: str,
) -> None:
    fields = _fields(folder)
    edit(fields)
    _write_unkeyed(folder, fields)
    assert "cannot verify it" in _refused(folder)  # no key: refused on sight
    _write_under_another_key(folder, fields, tmp_path, monkeypatch)
    assert "another account's fedbench key" in _refused(folder)
    # Accepted explicitly as another account's: its content is still checked.
    assert pytest.raises(FedbenchError, resumed_experiment, folder, None, (), True).match(why)


# --- a missing checkpoint ---------------------------------------------------------------------


def test_a_folder_whose_checkpoint_is_gone_is_one_line_exit_2(folder: Path) -> None:
    (folder / checkpoint.CHECKPOINT).unlink()
    with pytest.raises(FedbenchError, match="checkpoint.pt is missing, but the folder records 3"):
        resumed_experiment(folder, None)
    done = run_fedbench([f"resume={folder}"], timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "checkpoint.pt is missing" in lines[0], done.stderr[-2000:]
    assert not list(folder.glob("rounds.interrupted-*.csv"))  # nothing was started over


# --- the _target_ allowlist -------------------------------------------------------------------


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _config_only(served: Path, tmp_path: Path, strategy: dict[str, Any]) -> Path:
    folder = tmp_path / "shared"
    folder.mkdir()
    config = yaml.safe_load((served / "config.yaml").read_text())
    config["strategy"] = strategy
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder


def _refused_by_cli(folder: Path, target: str) -> None:
    done = run_fedbench([f"resume={folder}"], timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"strategy._target_={target} is not allowed" in lines[0], lines


def test_a_torch_load_target_in_a_shared_folder_runs_nothing(served: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = tmp_path / "payload.pt"
    torch.save(_Payload(marker), payload)
    strategy = {"_target_": "torch.load", "f": str(payload), "weights_only": False}
    _refused_by_cli(_config_only(served, tmp_path, strategy), "torch.load")
    assert not marker.exists()
    torch.load(payload, weights_only=False)  # the payload is real: loaded, it runs
    assert marker.exists()


def test_a_builtins_open_target_in_a_shared_folder_writes_nothing(
    served: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "notes.txt"
    victim.write_text("keep me\n")
    strategy = {"_target_": "builtins.open", "file": str(victim), "mode": "w"}
    _refused_by_cli(_config_only(served, tmp_path, strategy), "builtins.open")
    assert victim.read_text() == "keep me\n"
