"""The run folder: rounds.csv, summary.json and plots, written as the run goes.

Rows are appended and flushed after every round and the summary is replaced
atomically after every evaluation, so a run that fails late keeps what it
measured; `finish` marks the summary completed or failed and draws the plots.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fedbench.report.records import CSV_FIELDS, STATUSES, RoundReport, to_row

ROUNDS_CSV = "rounds.csv"
SUMMARY_JSON = "summary.json"


@dataclass(frozen=True)
class DayResult:
    day: int  # 0 = the pretrained model, before any device trained
    round: int
    accuracy: float
    loss: float
    virtual_time_s: float
    host_wall_s: float  # since the run started
    round_wall_s: float = 0.0  # host seconds of the round's send, train, receive and aggregate


class RunWriter:
    def __init__(self, run_dir: Path, meta: dict[str, Any]) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.meta = meta
        self.days: list[DayResult] = []
        self.statuses: Counter[str] = Counter()
        self.energy_j = 0.0
        self.reports = 0
        self.virtual_time_s = 0.0
        path = run_dir / ROUNDS_CSV
        new = not path.exists()
        self._csv = path.open("a", newline="")
        self._rows = csv.DictWriter(self._csv, fieldnames=CSV_FIELDS)
        if new:
            self._rows.writeheader()
            self._flush()

    def rounds(self, reports: list[RoundReport]) -> None:
        for report in reports:
            self._rows.writerow(to_row(report))
            self.statuses[report.status] += 1
            if not math.isnan(report.energy_j):
                self.energy_j += report.energy_j
        self.reports += len(reports)
        self._flush()

    def day(self, result: DayResult) -> None:
        self.days.append(result)
        self.virtual_time_s = result.virtual_time_s
        self._write_summary("running", "")

    def finish(self, status: str, error: str = "", plots: bool = True) -> dict[str, Any]:
        self._csv.close()
        summary = self._write_summary(status, error)
        if plots and self.days:
            from fedbench.report.plots import accuracy_vs_day

            accuracy_vs_day(
                self.days,
                self.run_dir / "accuracy_vs_day.png",
                title=str(self.meta.get("name", "")),
            )
        return summary

    def _flush(self) -> None:
        self._csv.flush()
        os.fsync(self._csv.fileno())

    def _write_summary(self, status: str, error: str) -> dict[str, Any]:
        first = self.days[0] if self.days else None
        last = self.days[-1] if self.days else None
        summary = {
            **self.meta,
            "status": status,
            "error": error,
            "day0_accuracy": first.accuracy if first else None,
            "final_day": last.day if last else None,
            "final_accuracy": last.accuracy if last else None,
            "accuracy_per_day": {str(d.day): d.accuracy for d in self.days},
            "days": [asdict(d) for d in self.days],
            "totals": {
                "rounds": last.round if last else 0,
                "reports": self.reports,
                "status_counts": {s: self.statuses.get(s, 0) for s in STATUSES},
                "energy_j": self.energy_j,
                "virtual_time_s": self.virtual_time_s,
                "host_wall_s": last.host_wall_s if last else 0.0,
            },
        }
        path = self.run_dir / SUMMARY_JSON
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=_jsonable) + "\n")
        os.replace(tmp, path)
        return summary


def _jsonable(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)
