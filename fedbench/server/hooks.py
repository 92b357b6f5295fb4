"""What happens around the run and every round, as hooks of the round loop (fedbench.server.run).

Always there, because selection and honest endings rest on them (the server
assembly adds them, fedbench.server.app):

- `AvailabilityHook`: which devices can be picked at the round's virtual start;
- `LedgerHook`: the round's reports and the devices' emulated states into the
  ledger the selector reads;
- `Signals`: a warning, once per run, when the app never read a key its
  algorithm sent, or no reply carries what the selector selects by.

Configured, in the `hooks` group (fedbench/conf/hooks/default.yaml), and built here
by `build_hooks`:

- `RecordHook`: rounds.csv, client_metrics.csv, server_rounds.csv and, on
  evaluation rounds, the summary (fedbench.report);
- `ProgressHook`: the console lines;
- `LoggerHook`: the experiment trackers of `report.loggers`;
- `CheckpointHook`: everything needed to resume after this round;
- any other ServerHook, e.g. the stopping hooks of fedbench.server.stopping.

Order matters only in that the checkpoint comes after the records: it
vouches for the rows written so far.
"""

from __future__ import annotations

import math
import time

from fedbench.core.records import to_row
from fedbench.errors import FedbenchError
from fedbench.experiment.build import built
from fedbench.experiment.fleet import fleet_index
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.report.loggers import RunLogger, build_loggers
from fedbench.report.progress import console
from fedbench.report.server_rounds import ServerRound
from fedbench.report.writer import DayResult
from fedbench.scenarios.base import RoundSpec
from fedbench.server import checkpoint
from fedbench.server.evaluation import accuracy_of, accuracy_per_rate, examples_of, loss_of
from fedbench.server.fleet_view import FleetView
from fedbench.server.run import Availability, LoopState, RoundOutcome, Run, ServerHook


class AvailabilityHook(ServerHook):
    def __init__(self, view: FleetView, ledger: Ledger) -> None:
        self.view = view
        self.ledger = ledger
        self.counts = Availability(len(ledger), 0)  # at the last round's start

    def on_run_begin(self, run: Run) -> None:
        run.availability = self.counts  # server_rounds.csv reports them
        self.view.start_windows(self.ledger)

    def before_round(self, spec: RoundSpec, now_s: float) -> None:
        self.view.update_availability(self.ledger, now_s)
        self.counts.available = int(self.ledger.available.sum())
        self.counts.low_battery = self.view.low_battery


class LedgerHook(ServerHook):
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.index_of = fleet_index(ledger.devices)

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.ledger.record(outcome.reports, self.index_of)
        for reply in outcome.replies:
            if reply.state is not None:
                self.ledger.set_state(reply.device.index, reply.state)


class RecordHook(ServerHook):
    """rounds.csv, client_metrics.csv, server_rounds.csv and, on evaluation rounds, the
    summary's evaluations."""

    def on_run_begin(self, run: Run) -> None:
        self.writer = run.writer
        self.server_rounds = run.server_rounds
        self.wall_start = run.wall_start
        self.availability = run.availability

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
        self.writer.rounds(outcome.reports, outcome.client_metrics)
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
                available=self.availability.available,
                low_battery=self.availability.low_battery,
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
                    examples_of(outcome.evaluation),
                ),
                accuracy_per_rate(outcome.evaluation),  # a submodel algorithm's widths
            )


class ProgressHook(ServerHook):
    """A line per evaluation (or per round), and the rounds task's progress."""

    def __init__(self, per_round: bool | None = None) -> None:
        """`per_round`: a line per round (None: as `report.progress_per_round` says)."""
        self.per_round = per_round

    def on_run_begin(self, run: Run) -> None:
        if self.per_round is None:
            self.per_round = run.experiment.report.progress_per_round
        self.wall_start = run.wall_start
        self.unit = run.unit
        self.task = run.task

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
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

    def __init__(self) -> None:
        self.loggers: list[RunLogger] = []

    def on_run_begin(self, run: Run) -> None:
        self.loggers = build_loggers(list(run.experiment.report.loggers), run.run_dir)
        self.energy_j = run.writer.energy_total

    def on_run_end(self, run: Run, status: str) -> None:
        for logger in self.loggers:
            logger.close()

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
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
    """After every round, what `resume=<run folder>` continues from."""

    def on_run_begin(self, run: Run) -> None:
        self.run = run

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
        run = self.run
        run.save(
            checkpoint.Checkpoint(
                round=state.round,
                now_s=state.now_s,
                model_version=state.model_version,
                arrays=state.arrays.to_torch_state_dict(),
                selector=run.selector.state_dict(),
                algorithm=checkpoint.export_data(run.algorithm),
                ledger=run.ledger.state_dict(),
                writer={**run.writer.state_dict(), "server_rounds": run.server_rounds.state_dict()},
                rng=checkpoint.rng_state(),
            )
        )


class Signals(ServerHook):
    """A warning, once per run, where the run would silently not be what it says.

    - the app's ClientApp never read a train config key that the algorithm's
      client half is registered for (FedProx's `proximal-mu`): its devices
      train without the algorithm's client half (fedbench.client.reads);
    - the selector selects by a RoundReport field (`SelectionStrategy.signals`,
      Oort's `train_loss`) that no successful reply of a round carries.

    Each goes to the console and to summary.json `warnings`.
    """

    def on_run_begin(self, run: Run) -> None:
        self.run = run
        self.warned: set[str] = set()
        self.algorithm = run.experiment.algorithm.target.rpartition(".")[2]
        self.strategy = type(run.selector).__name__

    def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> None:
        for reply in outcome.replies:
            for key in reply.unread:
                self.warn(
                    key,
                    f"algorithm {self.algorithm} sends '{key}' but the app's ClientApp never "
                    f"read it (device {reply.device.name}, round {outcome.spec.round}): its "
                    "devices train without the algorithm's client half",
                )
        ok = [r for r in outcome.reports if r.status == "ok"]
        for signal in type(self.run.selector).signals:
            if ok and all(not math.isfinite(getattr(r, signal)) for r in ok):
                self.warn(
                    signal,
                    f"strategy {self.strategy} selects by {signal}, but no reply of round "
                    f"{outcome.spec.round} reported one (the app's metrics have no "
                    f"'{signal}'): it selects without that signal",
                )

    def warn(self, key: str, line: str) -> None:
        if key in self.warned:
            return
        self.warned.add(key)
        self.run.warnings.append(line)
        console.warn(line)


def build_hooks(experiment: Experiment) -> list[ServerHook]:
    """The `hooks` group's hooks, in order; refused unless each is a ServerHook and the
    records are kept."""
    hooks = [
        built(target, ServerHook, "a run hook (fedbench.server.run.ServerHook)")
        for target in experiment.hooks.entries.values()
    ]
    if not any(isinstance(h, RecordHook) for h in hooks):
        names = ", ".join(experiment.hooks.entries) or "none"
        raise FedbenchError(
            f"hooks: no entry builds {RecordHook.__module__}.RecordHook (hooks: {names}); "
            "every run writes its rows: keep `default` in the list, e.g. "
            "hooks=[default,target_accuracy]"
        )
    return hooks


def clock(seconds: float) -> str:
    days, rest = divmod(int(seconds), 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{days}d {h:02d}:{m:02d}:{s:02d}"


def progress(line: str) -> None:
    console.line(line)
