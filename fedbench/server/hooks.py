"""What happens around every round, as hooks of the round loop (fedbench.server.loop).

- `AvailabilityHook`: which devices can be picked at the round's virtual start;
- `LedgerHook`: the round's reports and the devices' emulated states into the
  ledger the selector reads;
- `RecordHook`: rounds.csv, server_rounds.csv and, on evaluation rounds, the
  summary (fedbench.report);
- `ProgressHook`: the console lines;
- `CheckpointHook`: everything needed to resume after this round.

Order matters only in that the checkpoint comes last: it saves what the
others changed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from fedbench.core.records import to_row
from fedbench.ledger import Ledger
from fedbench.report.loggers import RunLogger
from fedbench.report.progress import Task, console
from fedbench.report.server_rounds import ServerRound, ServerRoundsWriter
from fedbench.report.writer import DayResult, RunWriter
from fedbench.scenarios.base import RoundSpec
from fedbench.server import checkpoint
from fedbench.server.evaluation import accuracy_of, loss_of
from fedbench.server.fleet_view import FleetView
from fedbench.server.run import LoopState, RoundOutcome, ServerHook
from strategies.base import SelectionStrategy


class AvailabilityHook(ServerHook):
    def __init__(self, view: FleetView, ledger: Ledger) -> None:
        self.view = view
        self.ledger = ledger
        self.available = len(ledger)  # at the last round's start
        self.low_battery = 0

    def before_round(self, spec: RoundSpec, now_s: float) -> None:
        self.view.update_availability(self.ledger, now_s)
        self.available = int(self.ledger.available.sum())
        self.low_battery = self.view.low_battery


class LedgerHook(ServerHook):
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.index_of = {d.name: d.index for d in ledger.devices}

    def on_round(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.ledger.record(outcome.reports, self.index_of)
        for reply in outcome.replies:
            if reply.state is not None:
                self.ledger.set_state(reply.device.index, reply.state)


class RecordHook(ServerHook):
    def __init__(
        self,
        writer: RunWriter,
        server_rounds: ServerRoundsWriter,
        wall_start: float,
        availability: AvailabilityHook | None = None,
    ) -> None:
        self.writer = writer
        self.server_rounds = server_rounds
        self.wall_start = wall_start
        self.availability = availability

    def on_round(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.writer.rounds(outcome.reports)
        replied = sum(r.report.reason != "no reply" for r in outcome.replies)
        self.server_rounds.write(
            ServerRound(
                round=outcome.spec.round,
                day=outcome.spec.day,
                start_s=outcome.start_s,
                duration_s=outcome.closing.duration_s,
                end_s=outcome.end_s,
                picked=outcome.picked,
                replied=replied,
                aggregated=outcome.aggregated,
                close=outcome.closing.policy,
                close_reason=outcome.skipped or outcome.closing.reason,
                model_version=outcome.model_version,
                available=self.availability.available if self.availability else -1,
                low_battery=self.availability.low_battery if self.availability else 0,
                host_round_s=outcome.host_round_s,
                server_s=outcome.server_s,
            )
        )
        if outcome.evaluation is not None:
            self.writer.day(
                DayResult(
                    outcome.spec.day,
                    outcome.spec.round,
                    accuracy_of(outcome.evaluation),
                    loss_of(outcome.evaluation),
                    state.now_s,
                    time.perf_counter() - self.wall_start,
                    outcome.host_round_s,
                )
            )


class ProgressHook(ServerHook):
    """A line per evaluation (or per round), and the rounds task's progress."""

    def __init__(self, per_round: bool, wall_start: float, unit: str, task: Task) -> None:
        self.per_round = per_round
        self.wall_start = wall_start
        self.unit = unit
        self.task = task

    def on_round(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.task.advance()
        self.task.update(f"round {outcome.spec.round}, virtual {clock(state.now_s)}")
        if outcome.evaluation is None and not self.per_round:
            return
        ok = sum(r.status == "ok" for r in outcome.reports)
        accuracy = accuracy_of(outcome.evaluation or {})
        parts = [f"{self.unit} {outcome.spec.day}"]
        if not math.isnan(accuracy):
            parts[0] += f": accuracy {100 * accuracy:.2f}%"
        if self.unit != "round":
            parts.append(f"round {outcome.spec.round}")
        why = f" ({outcome.skipped})" if outcome.skipped else ""
        parts.append(f"{ok}/{len(outcome.reports)} devices ok{why}")
        parts.append(f"virtual {clock(state.now_s)}")
        parts.append(f"wall {time.perf_counter() - self.wall_start:.0f}s")
        progress(" | ".join(parts))


class LoggerHook(ServerHook):
    """Every round's rows and every evaluation to the experiment trackers (report.loggers)."""

    def __init__(self, loggers: list[RunLogger], energy_j: Callable[[], float | None]) -> None:
        self.loggers = loggers
        self.energy_j = energy_j

    def on_round(self, outcome: RoundOutcome, state: LoopState) -> None:
        rows = [to_row(r) for r in outcome.reports]
        for logger in self.loggers:
            logger.log_round(outcome.spec.round, outcome.spec.day, rows)
        if outcome.evaluation is None:
            return
        metrics = {k: v for k, v in outcome.evaluation.items() if math.isfinite(v)}
        metrics["virtual_time_s"] = state.now_s
        energy = self.energy_j()
        if energy is not None:
            metrics["energy_j"] = energy
        for logger in self.loggers:
            logger.log_evaluation(outcome.spec.round, outcome.spec.day, metrics)


class CheckpointHook(ServerHook):
    def __init__(
        self,
        run_dir_save: Callable[[checkpoint.Checkpoint], None],
        selector: SelectionStrategy,
        algorithm: object,
        ledger: Ledger,
        writer: RunWriter,
        server_rounds: ServerRoundsWriter,
    ) -> None:
        self.save = run_dir_save
        self.selector = selector
        self.algorithm = algorithm
        self.ledger = ledger
        self.writer = writer
        self.server_rounds = server_rounds

    def on_round(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.save(
            checkpoint.Checkpoint(
                round=state.round,
                now_s=state.now_s,
                model_version=state.model_version,
                arrays=state.arrays.to_torch_state_dict(),
                selector=self.selector.state_dict(),
                algorithm=checkpoint.export_data(self.algorithm),
                ledger=self.ledger.state_dict(),
                writer={
                    **self.writer.state_dict(),
                    "server_rounds": self.server_rounds.state_dict(),
                },
                rng=checkpoint.rng_state(),
            )
        )


def clock(seconds: float) -> str:
    days, rest = divmod(int(seconds), 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{days}d {h:02d}:{m:02d}:{s:02d}"


def progress(line: str) -> None:
    console.line(line)
