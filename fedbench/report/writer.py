"""The run folder: rounds.csv, client_metrics.csv, summary.json and figures, written as
the run goes.

Rows are appended and flushed after every round and the summary is replaced
atomically after every evaluation, so a run that fails late keeps what it
measured; `finish` marks the summary completed or failed and stamps its end
time. The server then analyses the folder (fedbench.analyze.analyze_finished:
figures/, rounds_summary.csv), which reads only these files.
A figure nobody measured is null in summary.json, never 0 (docs/results.md).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from fedbench.core.records import (
    CSV_FIELDS,
    METRIC_FIELDS,
    STATUSES,
    UNPROFILED,
    ClientMetric,
    RoundReport,
    to_row,
)
from fedbench.core.redact import redact_text
from fedbench.folders import open_to_write, write_file
from fedbench.report.provenance import now, provenance

ROUNDS_CSV = "rounds.csv"
CLIENT_METRICS_CSV = "client_metrics.csv"
SUMMARY_JSON = "summary.json"


@dataclass(frozen=True)
class DayResult:
    day: int  # 0 = the pretrained model, before any device trained
    round: int
    accuracy: float
    loss: float
    virtual_time_s: float
    host_wall_s: float  # since the run started
    # Host seconds of the round's send, train, receive and aggregate (NaN: no round, day 0).
    round_wall_s: float = math.nan
    # Test examples the accuracy was measured on (NaN: unknown, e.g. an app's evaluate_fn).
    examples: float = math.nan


class RunWriter:
    def __init__(self, run_dir: Path, meta: dict[str, Any], accelerator: str = "auto") -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.meta = meta
        self.provenance = provenance(accelerator=accelerator)
        self.days: list[DayResult] = []
        # Submodel algorithms: day -> width rate -> accuracy of that rate's submodel.
        self.per_rate: dict[str, dict[str, float]] = {}
        self.statuses: Counter[str] = Counter()
        self.energy_j = 0.0  # over the reports that measured it (energy_known)
        self.energy_known = 0
        self.reports = 0
        self.unprofiled = 0  # device-rounds whose energy and memory nobody measured
        self.virtual_time_s = 0.0
        self._csv, self._rows = _appender(run_dir / ROUNDS_CSV, CSV_FIELDS)
        self._metrics_csv, self._metric_rows = _appender(
            run_dir / CLIENT_METRICS_CSV, METRIC_FIELDS
        )

    def state_dict(self) -> dict[str, Any]:
        """Counters and the byte lengths of rounds.csv and client_metrics.csv: a checkpoint's
        view of the folder."""
        return {
            "days": [asdict(d) for d in self.days],
            "accuracy_per_rate": {day: dict(rates) for day, rates in self.per_rate.items()},
            "statuses": dict(self.statuses),
            "energy_j": self.energy_j,
            "energy_known": self.energy_known,
            "reports": self.reports,
            "unprofiled": self.unprofiled,
            "virtual_time_s": self.virtual_time_s,
            "csv_bytes": self._csv.tell(),
            "metrics_csv_bytes": self._metrics_csv.tell(),
            "start_time": self.provenance["start_time"],
            "initial_model_sha256": self.provenance.get("initial_model_sha256"),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint; rows past it are moved aside, never dropped.

        Rows after the checkpoint belong to a round that did not complete
        (the run was killed mid-round). That round is run again and writes
        the same rows, so they are moved to rounds.interrupted-<n>.csv.
        """
        self.days = [DayResult(**d) for d in state["days"]]
        # Checkpoints written before accuracy_per_rate was checkpointed: none.
        per_rate = state.get("accuracy_per_rate", {})
        self.per_rate = {day: dict(rates) for day, rates in per_rate.items()}
        self.statuses = Counter(state["statuses"])
        self.energy_j = float(state["energy_j"])
        self.reports = int(state["reports"])
        self.unprofiled = int(state.get("unprofiled", 0))
        # Checkpoints written before energy_known existed: every report counted as known.
        self.energy_known = int(state.get("energy_known", self.reports))
        if "start_time" in state:  # the run started then; this process resumed it now
            self.provenance["resumed_time"] = self.provenance["start_time"]
            self.provenance["start_time"] = state["start_time"]
        if state.get("initial_model_sha256"):  # day 0 ran in the first process
            self.provenance["initial_model_sha256"] = state["initial_model_sha256"]
        self.virtual_time_s = float(state["virtual_time_s"])
        path = self.run_dir / ROUNDS_CSV
        self._csv.close()
        keep = int(state["csv_bytes"])
        data = path.read_bytes()
        if len(data) > keep:
            n = len(list(self.run_dir.glob("rounds.interrupted-*.csv"))) + 1
            header = data.split(b"\n", 1)[0] + b"\n"
            write_file(self.run_dir / f"rounds.interrupted-{n}.csv", header + data[keep:])
            with open_to_write(path, "r+b") as f:
                f.truncate(keep)
        self._csv, self._rows = _appender(path, CSV_FIELDS)
        self._metrics_csv.close()
        metrics = self.run_dir / CLIENT_METRICS_CSV
        keep = int(state.get("metrics_csv_bytes", -1))  # -1: a checkpoint from before the file
        if 0 <= keep < metrics.stat().st_size:  # the round that did not complete writes again
            with open_to_write(metrics, "r+b") as f:
                f.truncate(keep)
        self._metrics_csv, self._metric_rows = _appender(metrics, METRIC_FIELDS)

    def rounds(self, reports: list[RoundReport], metrics: Iterable[ClientMetric] = ()) -> None:
        """A round's rows: one per device in rounds.csv, one per number its ClientApp
        returned in client_metrics.csv; both flushed."""
        for metric in metrics:
            self._metric_rows.writerow(asdict(metric))
        for report in reports:
            self._rows.writerow(to_row(report))
            self.statuses[report.status] += 1
            if not math.isnan(report.energy_j):
                self.energy_j += report.energy_j
                self.energy_known += 1
            self.unprofiled += report.kind == UNPROFILED
        self.reports += len(reports)
        self._flush(self._metrics_csv)
        self._flush()

    def energy_total(self) -> float | None:
        """Joules of every report that measured energy (None: none did)."""
        return self.energy_j if self.energy_known else None

    def day(self, result: DayResult, per_rate: Mapping[str, float] | None = None) -> None:
        """An evaluation's figures; `per_rate`: each width rate's accuracy (submodels)."""
        self.days.append(result)
        if per_rate:
            self.per_rate[str(result.day)] = dict(per_rate)
        self.virtual_time_s = result.virtual_time_s
        self._write_summary("running", "")

    def finish(self, status: str, error: str = "") -> dict[str, Any]:
        """Mark the run completed or failed; the summary as written."""
        self._csv.close()
        self._metrics_csv.close()
        self.provenance["end_time"] = now()
        return self._write_summary(status, error)

    def _flush(self, file: IO[Any] | None = None) -> None:
        file = file or self._csv
        file.flush()
        os.fsync(file.fileno())

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
            **self._per_rate(),
            "totals": {
                "rounds": last.round if last else 0,
                "reports": self.reports,
                "unprofiled_reports": self.unprofiled,
                "status_counts": {s: self.statuses.get(s, 0) for s in STATUSES},
                # Over the reports that measured energy; null if none did (host devices).
                "energy_j": self.energy_j if self.energy_known else None,
                "energy_unknown_reports": self.reports - self.energy_known,
                "virtual_time_s": self.virtual_time_s,
                "host_wall_s": last.host_wall_s if last else None,
            },
            "provenance": self.provenance,
        }
        summary = _nulls(summary)  # what is returned is what the file says
        # A secret the run was started with (a token in its command line) stays out
        # of the file (fedbench.core.redact); the provenance's command is masked already.
        # Written whole to a fresh file renamed over the name, never through a link.
        text = redact_text(json.dumps(summary, indent=2, default=str)) + "\n"
        write_file(self.run_dir / SUMMARY_JSON, text)
        return summary

    def _per_rate(self) -> dict[str, Any]:
        """summary.json's `accuracy_per_rate` and `final_accuracy_per_rate` (submodels only)."""
        if not self.per_rate:
            return {}
        return {
            "accuracy_per_rate": self.per_rate,
            "final_accuracy_per_rate": next(reversed(self.per_rate.values())),
        }


def _appender(path: Path, columns: tuple[str, ...]) -> tuple[IO[Any], csv.DictWriter[str]]:
    """A CSV of the run folder opened to append rows (never through a link); a new one
    gets its header. A file an older fedbench began keeps its own columns: a column
    added since is left out of its rows, never written under another's header."""
    file = open_to_write(path, "a", newline="")
    header: list[str] = []
    if file.tell():  # appending: the file's own header
        with open_to_write(path, "r+", newline="") as existing:  # never through a link
            header = next(csv.reader([existing.readline()]), [])
    rows = csv.DictWriter(file, fieldnames=header or columns, extrasaction="ignore")
    if not header:
        rows.writeheader()
        file.flush()
        os.fsync(file.fileno())
    return file, rows


def _nulls(value: Any) -> Any:
    """NaN and infinities (figures that do not exist) as JSON null, not the invalid `NaN`."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nulls(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nulls(v) for v in value]
    return value
