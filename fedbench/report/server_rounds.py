"""server_rounds.csv: one row per server round, as the server saw it.

The per-device rows are rounds.csv (fedbench.report.records); this file says
what the round as a whole did: when it started and how long it lasted on
the virtual clock (cut by the round-close policy), how many devices were
picked, replied and were aggregated, and the global model's version after it.
"""

from __future__ import annotations

import csv
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from fedbench.folders import open_to_write

SERVER_ROUNDS_CSV = "server_rounds.csv"


@dataclass(frozen=True)
class ServerRound:
    round: int
    day: int
    start_s: float  # virtual time the round started
    duration_s: float  # its length on the virtual clock (the close policy's cut)
    end_s: float
    picked: int  # devices the selector picked
    replied: int  # devices whose reply arrived (any status)
    aggregated: int  # updates the Flower strategy aggregated
    close: str  # the round-close policy: all | first_k | deadline
    close_reason: str  # what ended the round
    model_version: int  # the global model's version after the round
    available: int  # devices the strategy could pick at the round's start
    low_battery: int  # devices in an availability window but below the battery floor
    host_round_s: float  # host seconds from configure to aggregate
    server_s: float  # of those, the server's own work (selection, replies, aggregation)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ServerRound))


class ServerRoundsWriter:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / SERVER_ROUNDS_CSV
        new = not self.path.exists()
        self._file = open_to_write(self.path, "a", newline="")  # never through a link
        self._rows = csv.DictWriter(self._file, fieldnames=COLUMNS)
        if new:
            self._rows.writeheader()
            self._flush()

    def write(self, row: ServerRound) -> None:
        self._rows.writerow(asdict(row))
        self._flush()

    def state_dict(self) -> dict[str, Any]:
        return {"csv_bytes": self._file.tell()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint: rows of a round that did not complete are dropped."""
        self._file.close()
        keep = int(state["csv_bytes"])
        if self.path.stat().st_size > keep:
            with open_to_write(self.path, "r+b") as f:
                f.truncate(keep)
        self._file = open_to_write(self.path, "a", newline="")
        self._rows = csv.DictWriter(self._file, fieldnames=COLUMNS)

    def close(self) -> None:
        self._file.close()

    def _flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
