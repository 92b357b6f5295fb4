"""`resume=<run folder>`: continue a run from its checkpoint, with its own config.

The folder's config.yaml is the experiment - its runtime included: a
deployment folder continues as a deployment. Given alone, `resume=` uses it
as it is; given with other overrides, the composed experiment must equal it
(except where results go), so a folder is never continued under a
different configuration or runtime. A folder killed before its first
checkpoint starts over in place (its partial rows are moved aside by the
server, fedbench.report.integrity); one with a checkpoint continues after
its last complete round once rounds.csv is checked against it.

A run folder may come from someone else, so nothing in it is trusted
(docs/security.md): its files' sizes, and config.yaml's lines, nesting and
aliases, are capped before any is parsed (fedbench.trust.bounded); every
`_target_` in config.yaml must be on the allowlist (fedbench.trust.targets)
before anything is imported, and its arguments may name no URL, no other host
and no path outside the folder (fedbench.trust.arguments); the checkpoint must carry
this user's HMAC (fedbench.server.checkpoint), or be accepted explicitly with
`resume_untrusted=true`; and what it holds must agree with the folder's rows
(fedbench.server.resumable). A folder whose checkpoint was removed after it
recorded complete rounds is refused: it cannot continue from them.

Two checks keep a resumed run the run it was. The checkpoint's model arrays
must have the names, shapes and dtypes of the network config.yaml builds
(built on the meta device: no memory, no initialisation), so another model's
checkpoint, signed under this user's key, is refused here rather than when the
server loads it mid-run. And the code must be the code that made the folder:
the commit summary.json's provenance recorded against this checkout's - or,
where either side is not a git checkout, the fedbench version - unless
`resume_any_commit=true` says to continue with this code (then summary.json's
`provenance.earlier_code` keeps the code that wrote the earlier rounds).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from fedbench import __version__
from fedbench.errors import FedbenchError
from fedbench.experiment.build import build_model
from fedbench.experiment.schema import Experiment
from fedbench.report.integrity import RowsIntegrity
from fedbench.report.progress import console
from fedbench.report.provenance import (
    DIGEST_PREFIX,
    EARLIER_CODE_ENV,
    code_digest,
    git_commit,
    is_commit,
)
from fedbench.report.server_rounds import SERVER_ROUNDS_CSV
from fedbench.report.writer import ROUNDS_CSV, SUMMARY_JSON
from fedbench.scenarios.base import build_scenario
from fedbench.server import checkpoint
from fedbench.server.resumable import check_resumable
from fedbench.trust import bounded
from fedbench.trust.arguments import check_arguments
from fedbench.trust.targets import check_config

# Keys that say where and under which name results go, not what is run.
_PLACE_KEYS = ("output_dir", "name")


def resumed_experiment(
    folder: Path,
    composed: Experiment | None,
    allow_targets: Sequence[str] = (),
    untrusted: bool = False,
    any_commit: bool = False,
) -> Experiment:
    """The folder's experiment, once its config, code, checkpoint and rows pass every check.

    `any_commit` (`resume_any_commit=true`): continue with this code even where the
    folder was made by another commit (or fedbench version).
    """
    config = folder / "config.yaml"
    if not folder.is_dir():
        raise FedbenchError(f"resume={folder}: no such run folder")
    if not config.is_file():
        raise FedbenchError(f"resume={folder}: not a fedbench run folder (no config.yaml)")
    _check_sizes(folder)
    # The code first: another commit's config schema or model may read this folder wrongly.
    check_code(folder, any_commit)
    source = f"resume={folder}: config.yaml"
    try:  # its size, lines, nesting and aliases first: a 1 KB alias bomb is 10^9 values
        stored = bounded.load_yaml(config, source, bounded.CONFIG_YAML)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FedbenchError(f"resume={folder}: config.yaml is unreadable ({exc})") from None
    if not isinstance(stored, dict):
        raise FedbenchError(f"resume={folder}: config.yaml is not a mapping")
    # Before anything the config names is imported or called: the classes, then what
    # they would be given (no URL, no path outside the folder, unless the operator's own).
    check_config(stored, allow_targets, source)
    operator = composed.to_config() if composed is not None else None
    check_arguments(stored, folder, source, operator)
    if composed is not None:
        diffs = sorted(_diff(_what(stored), _what(composed.to_config())))
        if diffs:
            shown = "; ".join(diffs[:5]) + (f" (+{len(diffs) - 5} more)" if len(diffs) > 5 else "")
            raise FedbenchError(
                f"resume={folder} was run with a different config: {shown}. "
                "Resume with `resume=<folder>` alone, or start a new run"
            )
    stored["output_dir"] = str(folder)
    experiment = Experiment.from_config(stored, "")
    if experiment.app is not None:
        raise FedbenchError(
            f"resume={folder}: the run ran the Flower app {experiment.app.name!r}, whose "
            "ServerApp runs its own loop from its own start: fedbench cannot continue it "
            "mid-way; start a new run (another hydra.run.dir)"
        )
    check_checkpoint(folder, experiment, untrusted)
    return experiment


# What resume= and the resumed run read of the folder, and each one's cap.
_CAPPED = (
    (checkpoint.CHECKPOINT, bounded.CHECKPOINT),
    (ROUNDS_CSV, bounded.RUN_CSV),
    (SERVER_ROUNDS_CSV, bounded.RUN_CSV),
    (SUMMARY_JSON, bounded.SUMMARY_JSON),
)


def _check_sizes(folder: Path) -> None:
    """Every file of the folder that is read later is within its cap, before any is read.

    The readers after this one (the checkpoint's HMAC, rounds.csv's fingerprint, the
    server's resume) read these files whole; a sparse 5 GB checkpoint.pt costs nothing
    on disk. summary.json is parsed here too: JSON nested 100,000 deep is 200 KB.
    """
    for name, cap in _CAPPED:
        path = folder / name
        if path.exists():
            bounded.check_size(path, f"resume={folder}: {name}", cap)
    summary = folder / SUMMARY_JSON
    if summary.exists():
        with contextlib.suppress(ValueError):  # damaged: the checks after this one say so
            bounded.load_json(summary, f"resume={folder}: {SUMMARY_JSON}", bounded.SUMMARY_JSON)


def check_checkpoint(folder: Path, experiment: Experiment, untrusted: bool) -> None:
    """Refuse a checkpoint this user's key does not vouch for (unless told), or whose
    content disagrees with the folder; accept an unkeyed one for the server by digest."""
    path = folder / checkpoint.CHECKPOINT
    if not path.is_file():
        _check_not_removed(folder)
        return
    try:
        sealed = checkpoint.unseal(path)
    except OSError as exc:
        raise FedbenchError(f"resume={folder}: cannot read {path} ({exc})") from None
    if not sealed.keyed:
        if not untrusted:
            raise FedbenchError(f"resume={folder}: {sealed.problem}")
        console.line(
            f"resume: continuing {path} without a verified key (resume_untrusted=true); "
            "its content is checked against the folder's rows"
        )
        os.environ[checkpoint.ACCEPTED_ENV] = sealed.digest  # the server reads these bytes only
    ckpt = checkpoint.parse(path, sealed.body)
    checkpoint.check_model(path, ckpt.arrays, model_shapes(experiment))
    if "integrity" in ckpt.writer:  # rounds.csv as the checkpoint saw it
        RowsIntegrity(folder / ROUNDS_CSV).verify(ckpt.writer["integrity"])
    total = sum(1 for _ in build_scenario(experiment).schedule())
    check_resumable(folder, ckpt, total)


def model_shapes(experiment: Experiment) -> dict[str, torch.Tensor]:
    """The state of the network `experiment` builds, as shapes and dtypes only.

    Built on the meta device: no memory is allocated and no initialiser draws from
    torch's generator (forked anyway, so the driver's random state stays as it was).
    """
    with torch.random.fork_rng(devices=[]):
        try:
            with torch.device("meta"):
                return dict(build_model(experiment.model).state_dict())
        except Exception:  # noqa: BLE001 - an op the meta device lacks: build it for real
            return dict(build_model(experiment.model).state_dict())


# --- the code that made the folder -----------------------------------------------------------

_MAX_EARLIER = 100  # provenance.earlier_code entries carried from a folder


def check_code(folder: Path, any_commit: bool) -> None:
    """Refuse to continue a folder made by other code, unless `any_commit`.

    The code is the commit summary.json's provenance recorded, against this
    checkout's; where either side is not a git checkout (an installed wheel), the
    digest of fedbench's files (`provenance.code_digest`); for a folder of a fedbench
    older than the digest, its version. A folder whose summary.json is missing or
    names none of them (a damaged file: the checks after this one say so) is not
    compared. The code of the
    folder's earlier rounds, where it is not this code, goes to the server in
    `FEDBENCH_EARLIER_CODE` (summary.json's `provenance.earlier_code`).
    """
    os.environ.pop(EARLIER_CODE_ENV, None)
    recorded = _recorded_provenance(folder)
    if recorded is None:
        return
    commit, _ = git_commit()
    theirs, mine, key = "", "", ""
    if is_commit(recorded.get("git_commit")) and is_commit(commit):
        theirs, mine, key = str(recorded["git_commit"]), commit, "git_commit"
    elif _is_digest(recorded.get("code_digest")):  # either side outside git: the files
        theirs, mine = str(recorded["code_digest"]), code_digest()
        key = "code_digest; one side is not a git checkout"
    elif _is_version(recorded.get("fedbench_version")):  # an older fedbench's folder
        theirs, mine = f"fedbench {recorded['fedbench_version']}", f"fedbench {__version__}"
        key = "fedbench_version; one side is not a git checkout, the folder has no code_digest"
    earlier = [c for c in _earlier(recorded) if c != mine] if theirs else []
    if theirs != mine:
        if not any_commit:
            how = (
                f"resume from a checkout of it (git checkout {theirs}, or git worktree add "
                f"DIR {theirs})"
                if is_commit(theirs)
                else f"resume with the fedbench whose files give {_named(theirs)}"
                if _is_digest(theirs)
                else f"resume with {theirs}"
            )
            raise FedbenchError(
                f"resume={folder}: the run was made by {_named(theirs)} ({SUMMARY_JSON} "
                f"provenance.{key}), and this code is {_named(mine)}: its remaining rounds "
                f"would run other code than its first; {how}, or give resume_any_commit=true "
                f"to continue it with this code ({SUMMARY_JSON} then records both)"
            )
        console.line(
            f"resume: continuing {folder}, made by {_named(theirs)}, with {_named(mine)} "
            "(resume_any_commit=true)"
        )
        earlier.append(theirs)
    if earlier:
        os.environ[EARLIER_CODE_ENV] = json.dumps(list(dict.fromkeys(earlier)))


def _recorded_provenance(folder: Path) -> dict[str, Any] | None:
    path = folder / SUMMARY_JSON
    if not path.is_file():
        return None
    try:
        summary = bounded.load_json(path, f"resume={folder}: {SUMMARY_JSON}", bounded.SUMMARY_JSON)
    except ValueError:
        return None
    recorded = summary.get("provenance") if isinstance(summary, dict) else None
    return recorded if isinstance(recorded, dict) else None


def _is_version(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9A-Za-z.+!_-]{1,64}", value) is not None


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and re.fullmatch(f"{DIGEST_PREFIX}[0-9a-f]{{64}}", value) is not None
    )


def _named(code: str) -> str:
    if is_commit(code):
        return f"commit {code}"
    return f"code {code[: len(DIGEST_PREFIX) + 12]}" if _is_digest(code) else code


def _earlier(recorded: dict[str, Any]) -> list[str]:
    """The folder's own `provenance.earlier_code`: commits, digests and versions only, a few."""
    listed = recorded.get("earlier_code")
    if not isinstance(listed, list):
        return []
    return [
        c
        for c in listed[:_MAX_EARLIER]
        if is_commit(c)
        or _is_digest(c)
        or (isinstance(c, str) and c.startswith("fedbench ") and _is_version(c[9:]))
    ]


def _check_not_removed(folder: Path) -> None:
    """No checkpoint: fine for a run killed in its first round, not after more.

    A checkpoint is written after every complete round, so a folder that
    records two complete rounds, or a completed run, had one and lost it.
    """
    try:
        with (folder / SERVER_ROUNDS_CSV).open(newline="") as f:
            complete = {row.get("round") for row in csv.DictReader(f)}
    except (OSError, UnicodeDecodeError, csv.Error):
        complete = set()
    try:
        summary = json.loads((folder / SUMMARY_JSON).read_text())
        status = summary.get("status") if isinstance(summary, dict) else None
    except (OSError, ValueError):
        status = None
    if len(complete) >= 2 or status == "completed":
        done = f"{len(complete)} complete round(s) in {SERVER_ROUNDS_CSV}"
        raise FedbenchError(
            f"resume={folder}: {checkpoint.CHECKPOINT} is missing, but the folder records "
            f"{done}{' and a completed run' if status == 'completed' else ''}: without its "
            "checkpoint the run cannot continue from them; start a new run (another "
            "hydra.run.dir)"
        )


def _what(experiment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in experiment.items() if k not in _PLACE_KEYS}


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(f"{sub} only in {'the folder' if key in a else 'this command'}")
            else:
                out.extend(_diff(a[key], b[key], sub))
        return out
    return [] if a == b else [f"{path}: {a!r} in the folder, {b!r} now"]
