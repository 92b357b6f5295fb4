"""A run folder from someone else cannot run code: checkpoint.pt loads plain data only."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch

from fedbench.errors import FedbenchError
from fedbench.server import checkpoint


class _Payload:
    """Unpickling this runs a shell command (what a hostile checkpoint would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickled_payload_in_checkpoint_pt_is_refused_and_never_runs(tmp_path: Path) -> None:
    import hashlib

    marker = tmp_path / "pwned"
    with (tmp_path / checkpoint.CHECKPOINT).open("wb") as f:
        torch.save({"format": checkpoint.FORMAT, "round": _Payload(marker)}, f)
    # Unkeyed: refused before a byte is parsed.
    with pytest.raises(FedbenchError, match="cannot verify it"):
        checkpoint.load(tmp_path)
    # Accepted explicitly (resume_untrusted=true): parsed as tensors and plain data only.
    accepted = hashlib.sha256((tmp_path / checkpoint.CHECKPOINT).read_bytes()).hexdigest()
    with pytest.raises(FedbenchError, match="only tensors and plain data load"):
        checkpoint.load(tmp_path, accept=accepted)
    assert not marker.exists()
    # The same bytes unpickled the old way would have run it: the test can fail.
    with (tmp_path / checkpoint.CHECKPOINT).open("rb") as f:
        torch.load(f, weights_only=False)
    assert marker.exists()


def test_a_checkpoint_round_trips_through_weights_only(tmp_path: Path) -> None:
    import numpy as np

    ckpt = checkpoint.Checkpoint(
        round=3,
        now_s=7200.0,
        model_version=3,
        arrays={"w": torch.ones(2)},
        selector={"scores": np.arange(3.0)},
        algorithm={},
        ledger={"names": ["a", "b"]},
        writer={"csv_bytes": 10, "integrity": {"crc32": torch.tensor([1, 2])}},
        rng=checkpoint.rng_state(),
    )
    checkpoint.save(tmp_path, ckpt)
    back = checkpoint.load(tmp_path)
    assert back is not None and back.round == 3 and back.ledger == {"names": ["a", "b"]}
    assert pickle.dumps(back.selector["scores"]) == pickle.dumps(np.arange(3.0))
