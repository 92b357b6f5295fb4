"""What a checkpoint must hold to be continued, checked against the run folder's rows.

The HMAC (fedbench.server.checkpoint) says who wrote a checkpoint; this says
whether what it holds could be a run's state at all - checked on every
resume, keyed or accepted with `resume_untrusted=true`, before anything starts:

- the global model is tensors, its floating ones finite, and so is the
  aggregator's state (a NaN model is no round's result);
- the round is one of the experiment's rounds, the clock finite and
  non-negative;
- server_rounds.csv, as far as the checkpoint wrote it, ends with this round,
  at this clock and model version; every evaluation the checkpoint holds
  happened at the clock of its round's row, with an accuracy in [0, 1] (or
  none), equal to the one summary.json recorded for it;
- rounds.csv holds no row of a later round, and no device started after the
  clock.

Without the key, an edit that keeps all of this consistent (a plausible
accuracy written into both the checkpoint and summary.json) is not
detectable; docs/security.md says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord

from fedbench.errors import FedbenchError
from fedbench.report.server_rounds import SERVER_ROUNDS_CSV
from fedbench.report.writer import ROUNDS_CSV, SUMMARY_JSON
from fedbench.server.checkpoint import CHECKPOINT, Checkpoint


def check_resumable(run_dir: Path, ckpt: Checkpoint, total_rounds: int) -> None:
    """Raise one line naming the first thing in `ckpt` no run of this experiment could hold."""
    where = run_dir / CHECKPOINT
    _check_model(where, ckpt)
    if isinstance(ckpt.round, bool) or not isinstance(ckpt.round, int):
        raise FedbenchError(f"{where}: round {ckpt.round!r} is not a round number")
    if not 1 <= ckpt.round <= total_rounds:
        raise FedbenchError(
            f"{where}: round {ckpt.round}, but this experiment has rounds "
            f"1..{total_rounds}; refused"
        )
    now = _number(ckpt.now_s)
    if not math.isfinite(now) or now < 0:
        raise FedbenchError(f"{where}: clock {ckpt.now_s!r} s is not a finite time >= 0; refused")
    rounds = _rows(run_dir / SERVER_ROUNDS_CSV, _written(ckpt, "server_rounds"))
    _check_server_rounds(where, ckpt, now, rounds)
    _check_days(where, run_dir, ckpt, now, rounds)
    devices = _rows(run_dir / ROUNDS_CSV, int(ckpt.writer.get("csv_bytes", 0)))
    for row in devices:
        if _int(row.get("round")) > ckpt.round:
            raise FedbenchError(
                f"{where}: round {ckpt.round}, but rounds.csv holds a row of round "
                f"{row.get('round')} before it; refused"
            )
        start = _number(row.get("start_s"))
        if math.isfinite(start) and start > now * (1 + 1e-9) + 1e-6:
            raise FedbenchError(
                f"{where}: clock {now:g} s, but rounds.csv has device {row.get('device')} "
                f"starting at {start:g} s in round {row.get('round')}; refused"
            )


def _check_model(where: Path, ckpt: Checkpoint) -> None:
    if not isinstance(ckpt.arrays, dict) or not ckpt.arrays:
        raise FedbenchError(f"{where}: holds no model; refused")
    for name, tensor in ckpt.arrays.items():
        if not isinstance(tensor, torch.Tensor):
            raise FedbenchError(f"{where}: model array {name!r} is not a tensor; refused")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise FedbenchError(
                f"{where}: model array {name!r} holds NaN or infinite values, which no "
                "round can produce; refused"
            )
    for path, value in _floats(ckpt.algorithm, "algorithm"):
        if not bool(np.isfinite(value).all()):
            raise FedbenchError(f"{where}: {path} holds NaN or infinite values; refused")


def _floats(value: Any, path: str) -> Iterator[tuple[str, np.ndarray]]:
    """The floating arrays (and floats) in an aggregator's state, with their paths."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield path, value.detach().numpy()
    elif isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.floating):
            yield path, value
    elif isinstance(value, ArrayRecord):
        for k, v in value.items():
            yield from _floats(v.numpy(), f"{path}.{k}")
    elif isinstance(value, float):
        yield path, np.asarray(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _floats(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _floats(v, f"{path}[{i}]")


def _check_server_rounds(
    where: Path, ckpt: Checkpoint, now: float, rounds: list[dict[str, str]]
) -> None:
    if not rounds:
        raise FedbenchError(
            f"{where}: round {ckpt.round}, but server_rounds.csv records no complete round "
            "before it; refused"
        )
    last = rounds[-1]
    version = _int(last.get("model_version"))
    if _int(last.get("round")) != ckpt.round or version != ckpt.model_version:
        raise FedbenchError(
            f"{where}: round {ckpt.round} (model version {ckpt.model_version}), but "
            f"server_rounds.csv's last round is {last.get('round')} (model version "
            f"{last.get('model_version')}); refused"
        )
    if not _same(_number(last.get("end_s")), now):
        raise FedbenchError(
            f"{where}: clock {now:g} s after round {ckpt.round}, but server_rounds.csv "
            f"ended that round at {last.get('end_s')} s; refused"
        )


def _check_days(
    where: Path, run_dir: Path, ckpt: Checkpoint, now: float, rounds: list[dict[str, str]]
) -> None:
    ended = {_int(r.get("round")): _number(r.get("end_s")) for r in rounds}
    recorded = _summary_days(run_dir)
    days = ckpt.writer.get("days", [])
    if not isinstance(days, list):
        raise FedbenchError(f"{where}: its evaluations are not a list; refused")
    for day in days:
        if not isinstance(day, Mapping):
            raise FedbenchError(f"{where}: an evaluation is not a record; refused")
        number, at, accuracy = (
            _int(day.get("round")),
            _number(day.get("virtual_time_s")),
            day.get("accuracy"),
        )
        acc = _number(accuracy)
        if not (math.isnan(acc) or 0.0 <= acc <= 1.0):
            raise FedbenchError(
                f"{where}: accuracy {accuracy!r} after round {number} is not in [0, 1]; refused"
            )
        if number > ckpt.round or (number >= 1 and not _same(ended.get(number, math.nan), at)):
            raise FedbenchError(
                f"{where}: an evaluation after round {number} at {at:g} s does not match "
                "server_rounds.csv; refused"
            )
        if number == 0 and not _same(at, 0.0) or at > now * (1 + 1e-9) + 1e-6:
            raise FedbenchError(f"{where}: an evaluation at {at:g} s is outside the run; refused")
        seen = recorded.get((_int(day.get("day")), number))
        if seen is not None and not _same(seen, acc):
            raise FedbenchError(
                f"{where}: accuracy {acc:.6g} after round {number}, but summary.json recorded "
                f"{seen:.6g}; refused"
            )


def _summary_days(run_dir: Path) -> dict[tuple[int, int], float]:
    """(day, round) -> accuracy, as summary.json recorded them (empty if unreadable)."""
    try:
        data = json.loads((run_dir / SUMMARY_JSON).read_text())
        days = data.get("days", []) if isinstance(data, dict) else []
        return {
            (_int(d["day"]), _int(d["round"])): _number(d["accuracy"])
            for d in days
            if isinstance(d, dict) and d.get("accuracy") is not None
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _written(ckpt: Checkpoint, key: str) -> int:
    state = ckpt.writer.get(key, {})
    return int(state.get("csv_bytes", 0)) if isinstance(state, Mapping) else 0


def _rows(path: Path, size: int) -> list[dict[str, str]]:
    """The rows of `path` within its first `size` bytes (what the checkpoint wrote)."""
    try:
        text = path.read_bytes()[:size].decode()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise FedbenchError(f"{path}: unreadable ({exc}); the run folder is damaged") from None
    return list(csv.DictReader(io.StringIO(text)))


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _int(value: object) -> int:
    number = _number(value)
    return int(number) if math.isfinite(number) else -1


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
