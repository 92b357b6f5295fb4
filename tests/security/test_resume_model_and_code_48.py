"""Issue 48, round two, item 8: a resumed run is the run it was - its model, its code.

- A checkpoint with another model's shapes, signed under this user's key, passed
  every content check, then failed as a Hydra traceback 50 s into the run, after
  figures were drawn into the folder. Its arrays are now checked against the
  network the folder's config.yaml builds (on the meta device) before anything runs.
- The run folder's git commit was not compared on resume. It now is, against this
  checkout's commit (outside git: the fedbench version); another is refused unless
  `resume_any_commit=true`, and then summary.json keeps the earlier one.

The folder is a real one (tests/security/test_resume_trust.py's: fedbench's own server,
real training, a signed checkpoint after each of 3 rounds); each test edits a copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from fedbench import __version__
from fedbench.errors import FedbenchError
from fedbench.models.small_cnn import SmallCNN
from fedbench.report import provenance
from fedbench.resume import resumed_experiment
from fedbench.server import checkpoint
from tests.e2e.test_resume_folder import _experiment, _killed_in_a_fork, _serve
from tests.helpers import run_fedbench
from tests.security.test_resume_trust import folder, served

pytestmark = pytest.mark.slow
__all__ = ["folder", "served"]  # fixtures, from the module that makes the folder

OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"
EARLIER = "FEDBENCH_EARLIER_CODE"  # provenance.EARLIER_CODE_ENV
ANOTHER_MODEL = (
    "a checkpoint of another model, not this folder's run; refused (restore the folder's "
    "own checkpoint.pt, or start a new run)"
)


def _refused(folder: Path, **kwargs: object) -> str:
    with pytest.raises(FedbenchError) as refused:
        resumed_experiment(folder, None, **kwargs)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message
    return message


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under the folder and a hash of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _one_line_exit_2(folder: Path, *args: str) -> str:
    """`python -m fedbench resume=<folder> ...`: its one stderr line, the folder untouched."""
    before = _snapshot(folder)
    done = run_fedbench([f"resume={folder}", *args], timeout=600)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert _snapshot(folder) == before  # no figures, no rows, no lock left, nothing rewritten
    return lines[0]


# --- 1. another model's checkpoint, signed for the folder -------------------------------------


def _resign(folder: Path, edit: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]):
    """The folder's own checkpoint, its model arrays replaced, saved under this user's key."""
    ckpt = checkpoint.load(folder)
    assert ckpt is not None
    checkpoint.save(folder, dataclasses.replace(ckpt, arrays=edit(dict(ckpt.arrays))))
    assert checkpoint.load(folder) is not None  # the HMAC verifies: only its shapes are wrong


def _wider(arrays: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return dict(SmallCNN(in_channels=3, num_classes=10, width=32).state_dict())


def _double(arrays: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.double() if v.is_floating_point() else v for k, v in arrays.items()}


def _fewer(arrays: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    arrays.pop("classifier.bias")
    return arrays


def _more(arrays: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**arrays, "head.weight": torch.zeros(2, 2)}


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_wider, "model array 'features.0.weight' is 32x3x3x3 float32, but the folder's model "
         "(config.yaml) has it as 16x3x3x3 float32"),
        (_double, "model array 'features.0.weight' is 16x3x3x3 float64, but the folder's model "
         "(config.yaml) has it as 16x3x3x3 float32"),
        (_fewer, "holds no model array 'classifier.bias', which the folder's model (config.yaml) "
         "has as 10 float32"),
        (_more, "model array 'head.weight' is not an array of the folder's model (config.yaml)"),
    ],
)  # fmt: skip
def test_another_models_checkpoint_is_refused_naming_the_first_array(
    folder: Path, edit: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]], why: str
) -> None:
    _resign(folder, edit)
    assert _refused(folder) == f"{folder / checkpoint.CHECKPOINT}: {why}: {ANOTHER_MODEL}"


def _killed_after_round_1(run_dir: Path) -> None:
    save = checkpoint.save

    def save_then_die(*args: object) -> None:
        save(*args)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGKILL)  # round 1 checkpointed, rounds 2 and 3 to come

    checkpoint.save = save_then_die  # type: ignore[assignment] # in the forked child only
    _serve(run_dir)


@pytest.fixture
def killed(tmp_path: Path) -> Path:
    """A real run folder killed after round 1's checkpoint, figures on: 2 rounds to go."""
    run_dir = tmp_path / "killed"
    _killed_in_a_fork(_killed_after_round_1, run_dir)
    config = _experiment(run_dir, ("report.plots=true",)).to_config()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return run_dir


def test_another_models_checkpoint_is_one_line_exit_2_and_the_folder_stays_as_it_was(
    killed: Path,
) -> None:
    # Before: every check passed, the run restarted, and round 2 failed in the network's
    # load_state_dict with a traceback after the figures were drawn into the folder.
    folder = killed
    _resign(folder, _wider)
    line = _one_line_exit_2(folder)
    assert line == (
        f"fedbench: error: {folder / checkpoint.CHECKPOINT}: model array 'features.0.weight' "
        "is 32x3x3x3 float32, but the folder's model (config.yaml) has it as 16x3x3x3 "
        f"float32: {ANOTHER_MODEL}"
    )
    assert not (folder / "figures").exists()


def test_the_model_is_built_on_the_meta_device_without_touching_the_rng(folder: Path) -> None:
    from fedbench.resume import model_shapes

    state = torch.get_rng_state()
    shapes = model_shapes(resumed_experiment(folder, None))
    assert torch.equal(torch.get_rng_state(), state)
    assert {t.device.type for t in shapes.values()} == {"meta"}
    ckpt = checkpoint.load(folder)
    assert ckpt is not None
    assert {k: (v.shape, v.dtype) for k, v in shapes.items()} == {
        k: (v.shape, v.dtype) for k, v in ckpt.arrays.items()
    }


# --- 2. the code that made the folder ---------------------------------------------------------


def _record(folder: Path, **values: object) -> None:
    """summary.json's provenance with `values` (what another checkout would have written)."""
    path = folder / "summary.json"
    summary = json.loads(path.read_text())
    summary["provenance"].update(values)
    path.write_text(json.dumps(summary))


@pytest.fixture
def in_git() -> str:
    commit, _ = provenance.git_commit()
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        pytest.skip("fedbench does not run from a git checkout here")
    return commit


@pytest.fixture(autouse=True)
def _no_earlier_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EARLIER, raising=False)


def test_the_commit_that_made_the_folder_resumes(folder: Path, in_git: str) -> None:
    assert json.loads((folder / "summary.json").read_text())["provenance"]["git_commit"] == in_git
    resumed_experiment(folder, None)
    assert EARLIER not in os.environ
    assert "earlier_code" not in provenance.provenance([])


def test_a_folder_of_another_commit_is_refused_naming_both(folder: Path, in_git: str) -> None:
    _record(folder, git_commit=OTHER_COMMIT)
    assert _refused(folder) == (
        f"resume={folder}: the run was made by commit {OTHER_COMMIT} (summary.json "
        f"provenance.git_commit), and this code is commit {in_git}: its remaining rounds "
        "would run other code than its first; resume from a checkout of it (git checkout "
        f"{OTHER_COMMIT}, or git worktree add DIR {OTHER_COMMIT}), or "
        "give resume_any_commit=true to continue it with this code (summary.json then "
        "records both)"
    )


def test_another_commit_on_the_command_line_is_one_line_exit_2(folder: Path, in_git: str) -> None:
    _record(folder, git_commit=OTHER_COMMIT)
    line = _one_line_exit_2(folder)
    assert line.startswith(f"fedbench: error: resume={folder}: the run was made by commit ")
    assert OTHER_COMMIT in line and in_git in line and "resume_any_commit=true" in line
    # Told to: it passes every check (dry_run: stops there) and names both commits.
    done = run_fedbench([f"resume={folder}", "resume_any_commit=true", "dry_run=true"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"made by commit {OTHER_COMMIT}, with commit {in_git}" in done.stdout
    assert f"would continue {folder}" in done.stdout


def test_resume_any_commit_continues_and_summary_json_keeps_the_earlier_commit(
    folder: Path, in_git: str
) -> None:
    _record(folder, git_commit=OTHER_COMMIT)
    resumed_experiment(folder, None, any_commit=True)
    assert provenance.provenance([])["earlier_code"] == [OTHER_COMMIT]
    # Resumed again by this commit, the folder's record still names the earlier one.
    _record(folder, git_commit=in_git, earlier_code=[OTHER_COMMIT, "not; a commit"])
    os.environ.pop(EARLIER)
    resumed_experiment(folder, None)
    assert provenance.provenance([])["earlier_code"] == [OTHER_COMMIT]


def test_resume_any_commit_needs_resume() -> None:
    from fedbench.cli.gate import _resume_flag

    with pytest.raises(FedbenchError, match=r"^resume_any_commit=true: true or false, and true"):
        _resume_flag({"resume_any_commit": True}, "resume_any_commit", None)
    with pytest.raises(FedbenchError, match=r"^resume_any_commit='yes': true or false"):
        _resume_flag({"resume_any_commit": "yes"}, "resume_any_commit", Path("run"))


def _outside_git(folder: Path, monkeypatch: pytest.MonkeyPatch, side: str) -> None:
    if side == "this code":
        monkeypatch.setattr("fedbench.resume.git_commit", lambda: (provenance.NOT_GIT, None))
    else:
        _record(folder, git_commit=provenance.NOT_GIT)


@pytest.mark.parametrize("side", ["this code", "the folder"])
def test_outside_git_the_code_digest_is_compared(
    folder: Path, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    # An installed wheel has no commit; its version (0.1.0 for every build) told no two
    # fedbench apart, the digest of its files does.
    _outside_git(folder, monkeypatch, side)
    resumed_experiment(folder, None)  # the same files: continued
    other = "sha256:" + "ab" * 32
    _record(folder, code_digest=other, fedbench_version=__version__)
    mine = provenance.code_digest()
    assert _refused(folder) == (
        f"resume={folder}: the run was made by code sha256:abababababab (summary.json "
        "provenance.code_digest; one side is not a git checkout), and this code is code "
        f"{mine[:19]}: its remaining rounds would run other code than its first; resume "
        "with the fedbench whose files give code sha256:abababababab, or give "
        "resume_any_commit=true to continue it with this code (summary.json then records "
        "both)"
    )
    resumed_experiment(folder, None, any_commit=True)
    assert provenance.provenance([])["earlier_code"] == [other]


def test_a_file_edited_changes_the_digest(tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "fedbench"
    shutil.copytree(provenance.package_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "package_dir", lambda: copy)
    provenance.code_digest.cache_clear()
    try:
        before = provenance.code_digest()
        with (copy / "conf" / "experiment" / "smoke.yaml").open("a") as f:
            f.write("# edited\n")
        provenance.code_digest.cache_clear()
        assert provenance.code_digest() != before
    finally:
        provenance.code_digest.cache_clear()


@pytest.mark.parametrize("side", ["this code", "the folder"])
def test_a_folder_older_than_the_digest_compares_the_fedbench_version(
    folder: Path, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    _outside_git(folder, monkeypatch, side)
    _record(folder, code_digest=None)  # written before provenance had code_digest
    resumed_experiment(folder, None)  # the same version: continued
    _record(folder, fedbench_version="0.0.1")
    assert _refused(folder) == (
        f"resume={folder}: the run was made by fedbench 0.0.1 (summary.json provenance."
        "fedbench_version; one side is not a git checkout, the folder has no code_digest), "
        f"and this code is fedbench {__version__}: its remaining rounds would run other "
        "code than its first; resume with fedbench 0.0.1, or give resume_any_commit=true "
        "to continue it with this code (summary.json then records both)"
    )
    resumed_experiment(folder, None, any_commit=True)
    assert provenance.provenance([])["earlier_code"] == ["fedbench 0.0.1"]


def test_a_folder_that_names_no_code_is_not_compared(folder: Path) -> None:
    _record(folder, git_commit="edited", fedbench_version=None, code_digest="edited")
    resumed_experiment(folder, None)
    (folder / "summary.json").unlink()  # a run killed before its first summary
    from fedbench.resume import check_code

    check_code(folder, False)
