"""rounds_summary.csv: one row per round - who was picked, what came of it, what it cost.

rounds.csv has one row per device; a reader comparing rounds wants them
folded: how many devices were picked, how many finished ok or failed (by
status), how long the server's round lasted on the virtual clock and where
the clock stood, the round's energy and the accuracy after it.
docs/results.md documents every column (tests/report/test_results_doc.py).
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from fedbench.analyze.runs import Run, number
from fedbench.core.records import STATUSES

ROUNDS_SUMMARY_CSV = "rounds_summary.csv"
ROUNDS_SUMMARY_COLUMNS: tuple[str, ...] = (
    "round",
    "day",
    "picked",
    "replied",
    "aggregated",
    *STATUSES,
    "unprofiled",
    "start_s",
    "duration_s",
    "end_s",
    "close",
    "time_in_rounds_s",
    "energy_j",
    "energy_unknown",
    "cumulative_energy_j",
    "accuracy",
    "loss",
    "staleness_mean",
    "host_round_s",
)


def round_clock(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of rounds 0..last on the virtual clock (seconds since the run began).

    The server's figures where it wrote them; for older runs the end of an
    evaluated round is the summary's clock then, and a round without an
    evaluation follows the previous one.
    """
    n = run.rounds + 1
    start, end = np.full(n, math.nan), np.full(n, math.nan)
    if run.server_rows is not None:
        for row in run.server_rows:
            r = int(row["round"])
            start[r], end[r] = number(row.get("start_s")), number(row.get("end_s"))
        start[0] = end[0] = 0.0
        return start, end
    clock_after = {e.round: e.clock_s for e in run.evaluations}
    previous = 0.0
    for r in range(n):
        duration = float(run.durations[r])
        known = clock_after.get(r, math.nan)
        end[r] = known if not math.isnan(known) else previous + duration
        start[r] = end[r] - duration
        previous = end[r]
    return start, end


def rounds_summary(run: Run) -> list[dict[str, object]]:
    """The rows of rounds_summary.csv (rounds 1..last; NaN and None are unknown)."""
    by_round: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in run.rows:
        by_round[int(row["round"])].append(row)
    server = {int(r["round"]): r for r in run.server_rows or []}
    evaluated = {e.round: e for e in run.evaluations}
    start, end = round_clock(run)
    time_in_rounds = np.cumsum(run.durations)
    cumulative = np.cumsum(np.nan_to_num(run.round_energy))
    seen = np.cumsum(~np.isnan(run.round_energy)) > 1  # round 0's 0 J does not count
    out: list[dict[str, object]] = []
    for r in range(1, run.rounds + 1):
        rows, srv, ev = by_round.get(r, []), server.get(r), evaluated.get(r)
        statuses = Counter(row.get("status", "") for row in rows)
        known = [number(row.get("energy_j")) for row in rows]
        stale = [number(row.get("staleness")) for row in rows if row.get("status") == "ok"]
        stale = [s for s in stale if not math.isnan(s)]
        days = {int(row["day"]) for row in rows if row.get("day", "") != ""}
        out.append(
            {
                "round": r,
                "day": int(srv["day"]) if srv else (min(days) if days else (ev.day if ev else "")),
                "picked": int(srv["picked"]) if srv else len(rows),
                "replied": _int_or_none(srv, "replied"),
                # Older runs: an ok report is one the server averaged (bad updates fail).
                "aggregated": int(srv["aggregated"]) if srv else statuses.get("ok", 0),
                **{s: statuses.get(s, 0) for s in STATUSES},
                "unprofiled": sum(row.get("kind") == "unprofiled" for row in rows),
                "start_s": start[r],
                "duration_s": float(run.durations[r]),
                "end_s": end[r],
                "close": srv.get("close", "") if srv else "",
                "time_in_rounds_s": float(time_in_rounds[r]),
                "energy_j": float(run.round_energy[r]),
                "energy_unknown": sum(math.isnan(k) for k in known),
                "cumulative_energy_j": float(cumulative[r]) if seen[r] else math.nan,
                "accuracy": ev.accuracy if ev else math.nan,
                "loss": ev.loss if ev else math.nan,
                "staleness_mean": float(np.mean(stale)) if stale else math.nan,
                "host_round_s": number(srv.get("host_round_s")) if srv else _host_round(run, r),
            }
        )
    return out


def _int_or_none(row: dict[str, str] | None, key: str) -> int | None:
    if row is None or row.get(key, "") == "":
        return None
    return int(row[key])


def _host_round(run: Run, r: int) -> float:
    """Older runs: the host seconds of an evaluated round from the summary."""
    for day in run.summary.get("days", []):
        if isinstance(day, dict) and day.get("round") == r:
            return number(day.get("round_wall_s"))
    return math.nan


def write_rounds_summary(run: Run, path: Path) -> Path:
    rows = rounds_summary(run)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ROUNDS_SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
    return path


def _cell(value: object) -> object:
    """Unknown (NaN, None) is an empty cell, never 0."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value
