"""`resume=<run folder>`: continue a run from its checkpoint, with its own config.

The folder's config.yaml is the experiment - its runtime included: a
deployment folder continues as a deployment. Given alone, `resume=` uses it
as it is; given with other overrides, the composed experiment must equal it
(except where results go), so a folder is never continued under a
different configuration or runtime. A folder killed before its first
checkpoint starts over in place (its partial rows are moved aside by the
server, fedbench.report.integrity); one with a checkpoint continues after
its last complete round once rounds.csv is checked against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment

# Keys that say where and under which name results go, not what is run.
_PLACE_KEYS = ("output_dir", "name")


def resumed_experiment(folder: Path, composed: Experiment | None) -> Experiment:
    config = folder / "config.yaml"
    if not folder.is_dir():
        raise FedbenchError(f"resume={folder}: no such run folder")
    if not config.is_file():
        raise FedbenchError(f"resume={folder}: not a fedbench run folder (no config.yaml)")
    try:
        stored = yaml.safe_load(config.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise FedbenchError(f"resume={folder}: config.yaml is unreadable ({exc})") from None
    if not isinstance(stored, dict):
        raise FedbenchError(f"resume={folder}: config.yaml is not a mapping")
    if composed is not None:
        diffs = sorted(_diff(_what(stored), _what(composed.to_config())))
        if diffs:
            shown = "; ".join(diffs[:5]) + (f" (+{len(diffs) - 5} more)" if len(diffs) > 5 else "")
            raise FedbenchError(
                f"resume={folder} was run with a different config: {shown}. "
                "Resume with `resume=<folder>` alone, or start a new run"
            )
    stored["output_dir"] = str(folder)
    return Experiment.from_config(stored, "")


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
