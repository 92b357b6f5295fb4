"""The ServerApp: one fedbench experiment on whatever Grid Flower gives it.

`run_server` assembles the round loop from the typed experiment - the app's
server side (fedbench's own or the user's), the device selector composed
with the Flower strategy, the round-close policy, the seating the runtime
provides, the hooks - starts or resumes it, and leaves a complete run
folder either way. In simulation the experiment is handed over in-process;
under `flwr run` it arrives as JSON in the run config (`fedbench-config`),
and with an empty run config (`flwr run .` at the project root) the default
experiment is composed, with `fedbench-overrides` applied.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp

from fedbench.analyze import analyze_finished
from fedbench.experiment.codec import EXPERIMENT_KEY, from_json, to_json
from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.report.integrity import RowsIntegrity, set_aside
from fedbench.report.lock import RunLock
from fedbench.report.loggers import RunLogger, build_loggers
from fedbench.report.progress import console
from fedbench.report.server_rounds import SERVER_ROUNDS_CSV, ServerRoundsWriter
from fedbench.report.writer import ROUNDS_CSV, SUMMARY_JSON, DayResult, RunWriter
from fedbench.runtime.base import build_runtime
from fedbench.runtime.launch import die_with_parent
from fedbench.scenarios.base import build_scenario
from fedbench.server import checkpoint
from fedbench.server.apps import ServerSide, server_side
from fedbench.server.close.base import build_close
from fedbench.server.defense import Defense
from fedbench.server.endings import COMPLETED, Ending, UpdateWatch, ending_of
from fedbench.server.evaluation import Evaluator, accuracy_of, loss_of
from fedbench.server.fleet_strategy import FleetStrategy, check_minimums
from fedbench.server.fleet_view import FleetView
from fedbench.server.hooks import (
    AvailabilityHook,
    CheckpointHook,
    LedgerHook,
    LoggerHook,
    ProgressHook,
    RecordHook,
    clock,
    progress,
)
from fedbench.server.loop import LoopParts, LoopState
from fedbench.server.modes import build_mode
from fedbench.server.resumable import check_resumable
from strategies.base import build_selector

OVERRIDES_KEY = "fedbench-overrides"


def run_server(grid: Grid, experiment: Experiment, run_dir: Path) -> dict[str, Any]:
    """Run (or, if run_dir holds a checkpoint, continue) one experiment."""
    with RunLock(run_dir):
        return _run_server(grid, experiment, run_dir)


def _run_server(grid: Grid, experiment: Experiment, run_dir: Path) -> dict[str, Any]:
    wall_start = time.perf_counter()
    devices = expand_fleet(experiment.fleet)
    random.seed(experiment.seed)  # Flower strategies sample with `random`
    np.random.seed(experiment.seed)
    scenario = build_scenario(experiment)
    selector = build_selector(experiment)
    selector.check_fleet(len(devices))
    resumed = checkpoint.load(run_dir)
    rows = RowsIntegrity(run_dir / ROUNDS_CSV)
    if resumed is None:
        # A run killed before its first checkpoint starts over; what it wrote is kept aside.
        if set_aside(run_dir, (ROUNDS_CSV, SERVER_ROUNDS_CSV, SUMMARY_JSON)):
            progress("no checkpoint: starting over (earlier rows moved to *.interrupted-*)")
    else:
        if "integrity" in resumed.writer:
            rows.verify(resumed.writer["integrity"])
        check_resumable(run_dir, resumed, sum(1 for _ in scenario.schedule()))
    writer = RunWriter(
        run_dir,
        {"name": experiment.name, "num_devices": len(devices)},
        accelerator=build_runtime(experiment).accelerator,
    )
    server_rounds = ServerRoundsWriter(run_dir)
    watch = UpdateWatch(writer.meta)
    loggers: list[RunLogger] = []
    try:
        loggers = build_loggers(list(experiment.report.loggers), run_dir)
        side = server_side(experiment, devices)
        ledger = Ledger(devices)
        with console.task("predicting each profile's round (measuring the workload)"):
            cannot = side.predict(ledger)
        writer.meta["predicted_oom"] = cannot  # strategies do not pick them
        if cannot:
            progress(
                f"{len(cannot)} device(s) cannot fit this training in memory and are "
                f"not picked: {', '.join(cannot[:8])}{' ...' if len(cannot) > 8 else ''}"
            )
        algorithm = side.algorithm()
        check_minimums(algorithm, selector.clients_per_round)
        runtime = build_runtime(experiment)
        defense = Defense.build(
            experiment.defense, devices, side.example_counts(), runtime.announced_names(run_dir)
        )
        progress(f"{len(devices)} devices; waiting for their nodes")
        seating = runtime.seating(grid, experiment, run_dir)
        view = FleetView(devices, experiment)
        fleet = FleetStrategy(
            algorithm,
            selector,
            ledger,
            seating,
            to_json(experiment),
            tuple(d.kind for d in devices),
            view.traits if view.population is not None else None,
        )
        evaluator = side.evaluator(grid, fleet, runtime.round_timeout_s)
        if resumed is None:
            state = _start(side, evaluator, writer, scenario.unit, wall_start)
        else:
            selector.load_state_dict(resumed.selector)
            checkpoint.import_data(algorithm, resumed.algorithm)
            ledger.load_state_dict(resumed.ledger)
            writer.load_state_dict(resumed.writer)
            server_rounds.load_state_dict(resumed.writer["server_rounds"])
            checkpoint.set_rng_state(resumed.rng)
            watch.resume(run_dir, resumed.round)
            state = LoopState(
                resumed.round, resumed.now_s, resumed.model_version, ArrayRecord(resumed.arrays)
            )
            progress(f"resuming after round {state.round} (virtual {clock(state.now_s)})")

        def save(ckpt: checkpoint.Checkpoint) -> None:
            # The checkpoint vouches for rounds.csv as far as it was written.
            mark = rows.advance(int(ckpt.writer["csv_bytes"]))
            checkpoint.save(run_dir, replace(ckpt, writer={**ckpt.writer, "integrity": mark}))

        rounds = sum(1 for _ in scenario.schedule())
        with console.task("rounds", total=rounds, unit="rounds") as task:
            availability = AvailabilityHook(view, ledger)
            hooks = [
                availability,
                LedgerHook(ledger),
                watch,  # before the records: the summary names rounds without an update
                RecordHook(writer, server_rounds, wall_start, availability),
                LoggerHook(loggers, writer.energy_total),
                ProgressHook(experiment.report.progress_per_round, wall_start, scenario.unit, task),
                CheckpointHook(save, selector, algorithm, ledger, writer, server_rounds),
            ]
            parts = LoopParts(
                grid,
                fleet,
                build_close(experiment),
                evaluator,
                hooks,
                side.train_config(),
                side.arrays_key,
                runtime.round_timeout_s,
                view.available_at,
                runtime.wall_clock,
                defense,
            )
            loop = build_mode(experiment).loop(parts)
            task.advance(state.round)
            try:
                loop.run(scenario.schedule(), state)
            finally:
                writer.meta["server_time_per_round_s"] = _spread(loop.server_times)
                writer.meta.update(loop.summary())
    except BaseException as exc:
        ending = ending_of(exc)
        server_rounds.close()
        writer.meta["failure"] = ending.failure
        _finish(writer, ending, experiment.report.plots)
        raise
    finally:
        for logger in loggers:
            logger.close()
    server_rounds.close()
    ending = watch.ending()
    writer.meta["failure"] = ending.failure
    summary = _finish(writer, ending, experiment.report.plots)
    if ending.status == COMPLETED:
        progress(f"done: {_result_line(summary, scenario.unit)} -> {run_dir}")
    else:
        progress(f"run {ending.status} ({ending.failure}): {ending.error} -> {run_dir}")
    return summary


def _finish(writer: RunWriter, ending: Ending, plots: bool) -> dict[str, Any]:
    """The summary, marked with how the run ended; with `plots`, the folder's figures."""
    summary = writer.finish(ending.status, ending.error)
    if plots:
        analyze_finished(writer.run_dir)
    return summary


def _start(
    side: ServerSide, evaluator: Evaluator, writer: RunWriter, unit: str, wall_start: float
) -> LoopState:
    """The initial model, scored as round (or day) 0."""
    arrays, how = side.initial_arrays()
    first = evaluator(0, arrays)
    accuracy = accuracy_of(first)
    wall = time.perf_counter() - wall_start
    writer.day(DayResult(0, 0, accuracy, loss_of(first), 0.0, wall))
    shown = f"accuracy {100 * accuracy:.2f}%" if not math.isnan(accuracy) else "not evaluated"
    progress(f"{unit} 0: {shown} (initial model: {how})")
    return LoopState(0, 0.0, 0, arrays)


def _spread(values: list[float]) -> dict[str, float] | None:
    """Median and max of the server's own seconds per round (hooks included)."""
    if not values:
        return None
    ordered = sorted(values)
    return {"median": ordered[len(ordered) // 2], "max": ordered[-1]}


def _result_line(summary: dict[str, Any], unit: str) -> str:
    first, last = summary.get("day0_accuracy"), summary.get("final_accuracy")
    if not isinstance(last, float) or math.isnan(last):
        return "no accuracy measured"
    line = f"{unit} {summary['final_day']} accuracy {100 * last:.2f}%"
    if isinstance(first, float) and not math.isnan(first):
        line += f" vs {unit} 0 {100 * first:.2f}%"
    return line


def experiment_of(context: Context) -> Experiment:
    """The experiment `flwr run` passed in the run config (or the default one, composed)."""
    text = context.run_config.get(EXPERIMENT_KEY, "")
    if isinstance(text, str) and text:
        return from_json(text)
    from fedbench.experiment.compose import compose_experiment

    overrides = str(context.run_config.get(OVERRIDES_KEY, "") or "").split()
    return compose_experiment(overrides)


def make_server_app(experiment: Experiment | None = None) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        if experiment is None:
            # A flwr-serverapp process of its own: it ends with the SuperExec that
            # started it, at once, rather than finishing a run nobody drives.
            with contextlib.suppress(OSError, AttributeError):
                die_with_parent(os.getppid())
        exp = experiment if experiment is not None else experiment_of(context)
        run_server(grid, exp, Path(exp.output_dir))

    return app


app = make_server_app()
