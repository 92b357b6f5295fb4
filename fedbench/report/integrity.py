"""rounds.csv checked against the checkpoint before a run continues from it.

Every checkpoint records how far rounds.csv was complete: its byte length,
its number of lines, a CRC-32 of every line and a SHA-256 of all of it. On
resume the file must still hold exactly those lines; a truncated, edited or
deleted file is refused with the first line that differs, so a run never
continues on results it did not write. (Lines past the checkpoint are an
interrupted round's: the run writer moves them aside.)

The CRCs are computed from the file as written, incrementally: a checkpoint
reads only the bytes added since the previous one.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fedbench.errors import FedbenchError


@dataclass
class RowsIntegrity:
    """The running fingerprint of one append-only CSV file."""

    path: Path
    size: int = 0  # bytes fingerprinted so far (whole lines only)
    crcs: list[int] = field(default_factory=list)  # one per line, header included
    _sha: Any = field(default_factory=hashlib.sha256)

    def advance(self, size: int) -> dict[str, Any]:
        """Fingerprint the file up to `size` bytes; the state a checkpoint stores."""
        if size > self.size:
            with self.path.open("rb") as f:
                f.seek(self.size)
                data = f.read(size - self.size)
            self._sha.update(data)
            self.crcs.extend(zlib.crc32(line) for line in _lines(data))
            self.size = size
        return self.state()

    def state(self) -> dict[str, Any]:
        return {
            "bytes": self.size,
            "lines": len(self.crcs),
            "sha256": self._sha.hexdigest(),
            "crc32": torch.tensor(self.crcs, dtype=torch.int64),
        }

    def verify(self, state: dict[str, Any]) -> None:
        """Raise, naming the first bad line, unless the file starts with what `state` saw."""
        size, lines = int(state["bytes"]), int(state["lines"])
        crcs = [int(c) for c in state["crc32"].tolist()]
        name = self.path.name
        try:
            data = self.path.read_bytes()[:size]
        except FileNotFoundError:
            raise FedbenchError(
                f"{self.path}: missing, but the checkpoint recorded {lines - 1} row(s) in it; "
                "the run folder is damaged - start a new run"
            ) from None
        got = list(_lines(data))
        for i, expected in enumerate(crcs):
            if i >= len(got):
                raise FedbenchError(
                    f"{self.path}: truncated: {len(got)} line(s), the checkpoint recorded "
                    f"{lines}; first missing line {i + 1} (row {i}). The run folder is "
                    "damaged - restore the file or start a new run"
                )
            if zlib.crc32(got[i]) != expected:
                raise FedbenchError(
                    f"{self.path}: line {i + 1} (row {i}) differs from what the run wrote; "
                    f"{name} was edited after the checkpoint - restore it or start a new run"
                )
        if hashlib.sha256(data).hexdigest() != state["sha256"]:
            raise FedbenchError(f"{self.path}: differs from what the run wrote (SHA-256)")
        self.size, self.crcs = size, crcs
        self._sha = hashlib.sha256(data)


def _lines(data: bytes) -> list[bytes]:
    """Whole lines, each with its terminator (the writer flushes whole rows)."""
    return data.splitlines(keepends=True)


def set_aside(run_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Move the files of a run that never reached its first checkpoint to `*.interrupted-<n>`.

    Its rows belong to a round that did not complete; the run starts over
    and writes them again, so they are kept aside, never mixed in.
    """
    moved = []
    n = len(list(run_dir.glob("rounds.interrupted-*.csv"))) + 1  # as the run writer counts
    for name in names:
        path = run_dir / name
        if path.exists():
            target = path.with_name(f"{path.stem}.interrupted-{n}{path.suffix}")
            path.replace(target)
            moved.append(target)
    return moved
