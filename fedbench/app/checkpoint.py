"""Crash-safe runs: after every round, everything needed to continue, written atomically.

`checkpoint.pt` in the run folder holds the global weights, the selection
strategy's state, the ledger (which carries the emulated devices'
temperature and battery), the virtual clock, RNG states and the run
writer's counters with the byte length of rounds.csv. A run resumed from it
continues after the last complete round and, with the same seed, produces
the same records and accuracy as a run that was never interrupted.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbench.errors import FedbenchError

CHECKPOINT = "checkpoint.pt"
FORMAT = 1


@dataclass(frozen=True)
class Checkpoint:
    round: int  # the last complete round
    now_s: float  # the virtual clock after it
    arrays: dict[str, torch.Tensor]
    selector: dict[str, Any]
    ledger: dict[str, Any]
    writer: dict[str, Any]
    rng: dict[str, Any]


def rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save(run_dir: Path, ckpt: Checkpoint) -> None:
    path = run_dir / CHECKPOINT
    tmp = path.with_suffix(".pt.tmp")
    with tmp.open("wb") as f:
        torch.save({"format": FORMAT, **ckpt.__dict__}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a kill leaves either the old or the new checkpoint, whole


def load(run_dir: Path) -> Checkpoint | None:
    path = run_dir / CHECKPOINT
    if not path.exists():
        return None
    try:
        data = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user-facing problem
        raise FedbenchError(f"{path} is not a readable fedbench checkpoint ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FedbenchError(f"{path} is not a fedbench checkpoint of format {FORMAT}")
    data.pop("format")
    return Checkpoint(**data)
