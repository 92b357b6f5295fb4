"""Honest endings: a round without an update says so, a run without any fails.

Every way a run can end has its own status and failure class in
summary.json (`status`, `failure`, `error`):

- completed: every round ran; `rounds_without_update` lists those in which
  no device delivered an update (each also a console line);
- failed / no_updates: no round produced an update (every device failed,
  dropped, timed out or was refused);
- failed / app: the user's app raised (its ServerApp, its evaluate_fn): the
  app and the exception; the traceback is in console.log;
- failed / error: an exception ended the run (its type and message);
- interrupted / interrupted: Ctrl-C or SIGTERM.

A run that did not complete exits non-zero (`python -m fedbench`).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fedbench.experiment.app import AppError
from fedbench.report.server_rounds import SERVER_ROUNDS_CSV
from fedbench.server.hooks import progress
from fedbench.server.run import LoopState, RoundOutcome, ServerHook

COMPLETED, FAILED, INTERRUPTED = "completed", "failed", "interrupted"
NO_UPDATES, ERROR, APP = "no_updates", "error", "app"


@dataclass(frozen=True)
class Ending:
    status: str
    failure: str = ""  # the failure class ("" when completed)
    error: str = ""


@dataclass
class UpdateWatch(ServerHook):
    """Which rounds produced no update, and why; the meta it keeps current.

    It also prints every reply the defense refused (fedbench.server.defense).
    """

    meta: dict[str, object]
    rounds: int = 0
    empty: list[int] = field(default_factory=list)
    first_reason: str = ""

    def __post_init__(self) -> None:
        self.meta["rounds_without_update"] = self.empty

    def resume(self, run_dir: Path, upto: int) -> None:
        """What server_rounds.csv says of the rounds before a resume."""
        try:
            with (run_dir / SERVER_ROUNDS_CSV).open(newline="") as f:
                for row in csv.DictReader(f):
                    if int(row["round"]) <= upto:
                        self.rounds += 1
                        if int(row["aggregated"]) == 0:
                            self.empty.append(int(row["round"]))
        except (OSError, KeyError, ValueError):
            self.rounds = upto
        self.meta["rounds_without_update"] = self.empty

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.rounds += 1
        for r in outcome.reports:
            if "refused" in r.reason:  # what the defense kept out, on the console too
                progress(f"round {outcome.spec.round}: {r.device}: {r.reason[:240]}")
        if outcome.aggregated > 0:
            return
        self.empty.append(outcome.spec.round)
        self.meta["rounds_without_update"] = self.empty
        why = _why(outcome)
        self.first_reason = self.first_reason or why
        progress(f"round {outcome.spec.round}: no device delivered an update ({why})")

    def ending(self) -> Ending:
        if self.rounds > 0 and len(self.empty) == self.rounds:
            return Ending(
                FAILED,
                NO_UPDATES,
                f"no round produced an update ({self.rounds} round(s); first: "
                f"{self.first_reason or 'see rounds.csv'})",
            )
        return Ending(COMPLETED)


def _why(outcome: RoundOutcome) -> str:
    if outcome.skipped:
        return outcome.skipped
    if not outcome.replies:
        return "no device was sent a message"
    counts = Counter(r.report.status for r in outcome.replies)
    shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    reason = next((r.report.reason for r in outcome.replies if r.report.reason), "")
    return f"{shown}: {reason[:160]}" if reason else shown


def ending_of(exc: BaseException) -> Ending:
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return Ending(INTERRUPTED, INTERRUPTED, f"{type(exc).__name__}: {exc}".rstrip(": "))
    if isinstance(exc, AppError):
        return Ending(FAILED, APP, str(exc))
    return Ending(FAILED, ERROR, f"{type(exc).__name__}: {exc}")
