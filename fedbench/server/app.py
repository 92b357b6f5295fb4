"""The ServerApp: one fedbench experiment on whatever Grid Flower gives it.

`run_server` assembles the round loop from the typed experiment - the app's
server side (fedbench's own or the user's), the device selector composed
with the Flower strategy, the round-close policy, the seating the runtime
provides, the hooks (the `hooks` group after the ones selection rests on,
each handed the `Run` at its beginning) - starts or resumes it, and leaves a
complete run folder either way; a hook may stop it early (summary.json
`stopped`). In simulation the experiment is handed over in-process;
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
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, Context
from flwr.common.logger import FLOWER_LOGGER
from flwr.serverapp import Grid, ServerApp

from fedbench.core import interrupt
from fedbench.core.interrupt import RunInterrupted
from fedbench.core.numerics import state_sha256
from fedbench.experiment.codec import EXPERIMENT_KEY, from_json, to_json
from fedbench.experiment.config_file import config_yaml
from fedbench.experiment.fleet import Fleet, expand_fleet, kind_column
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.report.integrity import RowsIntegrity, set_aside
from fedbench.report.lock import RunLock
from fedbench.report.progress import console
from fedbench.report.server_rounds import SERVER_ROUNDS_CSV, ServerRoundsWriter
from fedbench.report.writer import ROUNDS_CSV, SUMMARY_JSON, DayResult, RunWriter
from fedbench.runtime import heap
from fedbench.runtime.base import build_runtime
from fedbench.runtime.launch import die_with_parent
from fedbench.runtime.logs import copy_flower_logs
from fedbench.scenarios.base import build_scenario
from fedbench.server import checkpoint
from fedbench.server.app_loop import AppLoop, UserServerApp
from fedbench.server.apps import ServerSide, server_side
from fedbench.server.close.base import build_close
from fedbench.server.defense import Defense
from fedbench.server.endings import COMPLETED, Ending, UpdateWatch, ending_of
from fedbench.server.evaluation import (
    Evaluator,
    accuracy_of,
    accuracy_per_rate,
    examples_of,
    loss_of,
)
from fedbench.server.fleet_strategy import FleetStrategy, check_minimums
from fedbench.server.fleet_view import FleetView
from fedbench.server.hooks import (
    AvailabilityHook,
    CheckpointHook,
    LedgerHook,
    Signals,
    build_hooks,
    clock,
    progress,
)
from fedbench.server.loop import LoopParts, RoundLoop
from fedbench.server.modes import build_mode
from fedbench.server.resumable import check_resumable
from fedbench.server.run import LoopState, Run, ServerHook
from strategies.base import SelectionStrategy, build_selector

OVERRIDES_KEY = "fedbench-overrides"


def run_server(grid: Grid, experiment: Experiment, run_dir: Path) -> dict[str, Any]:
    """Run (or, if run_dir holds a checkpoint, continue) one experiment."""
    run_dir = run_dir.resolve()  # an app's ServerApp runs with the run folder as its cwd
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
    rounds = sum(1 for _ in scenario.schedule())
    folder = Folder.open(run_dir, experiment, len(devices), rounds)
    run: Run | None = None
    hooks: list[ServerHook] = []
    try:
        side, parts = _assemble(grid, experiment, devices, selector, folder)
        hooks = list(parts.hooks)
        with console.task("rounds", total=rounds, unit="rounds") as task:
            run = Run(
                experiment=experiment,
                run_dir=run_dir,
                writer=folder.writer,
                server_rounds=folder.server_rounds,
                ledger=parts.fleet.ledger,
                selector=selector,
                algorithm=parts.fleet.inner,
                unit=scenario.unit,
                wall_start=wall_start,
                task=task,
                save=folder.save,
            )
            if experiment.app is None:
                state = folder.resume(run) or _start(side, parts.evaluator, folder.writer, run)
            else:  # the app's ServerApp makes, evaluates and aggregates its own model
                state = LoopState(0, 0.0, 0, ArrayRecord())
            folder.writer.meta["warnings"] = run.warnings
            for hook in hooks:
                hook.on_run_begin(run)
            loop = _loop(experiment, parts, folder.writer, run)
            task.advance(state.round)
            try:
                loop.run(scenario.schedule(), state)
            finally:
                folder.writer.meta["server_time_per_round_s"] = _spread(loop.server_times)
                folder.writer.meta["stopped"] = asdict(loop.stopped) if loop.stopped else None
                folder.writer.meta.update(loop.summary())
            if loop.stopped is not None:
                stop = loop.stopped
                progress(f"stopped after round {stop.round} by {stop.hook}: {stop.reason}")
    except BaseException as exc:
        folder.close(ending_of(exc), run, hooks, experiment.report.plots)
        raise
    ending = folder.watch.ending()
    summary = folder.close(ending, run, hooks, experiment.report.plots)
    if ending.status == COMPLETED:
        progress(f"done: {_result_line(summary, scenario.unit)} -> {run_dir}")
    else:
        console.problem(f"run {ending.status} ({ending.failure}): {ending.error} -> {run_dir}")
    return summary


def _assemble(
    grid: Grid,
    experiment: Experiment,
    devices: Fleet,
    selector: SelectionStrategy,
    folder: Folder,
) -> tuple[ServerSide, LoopParts]:
    """The app's server side and what the run mode's loop runs with: strategies, hooks, ..."""
    hooks = build_hooks(experiment)
    if experiment.app is not None:  # an app's own loop cannot continue mid-way: no checkpoints
        hooks = [h for h in hooks if not isinstance(h, CheckpointHook)]
    side = server_side(experiment, devices)
    ledger = Ledger(devices)
    view = FleetView(devices, experiment)  # the population is drawn once, here
    with console.task("predicting each profile's round (measuring the workload)"):
        cannot = side.predict(ledger, view)
    heap.release()  # the population draw's temporaries, back to the OS for the whole run
    # Strategies do not pick them. Per profile: a million names would be no summary.
    folder.writer.meta["predicted_oom"] = _per_profile(devices, cannot)
    if len(cannot):
        names = ", ".join(ledger.names(cannot[:8]))
        progress(
            f"{len(cannot)} device(s) cannot fit this training in memory and are "
            f"not picked: {names}{' ...' if len(cannot) > 8 else ''}"
        )
    algorithm = side.algorithm()
    check_minimums(algorithm, selector.clients_per_round)
    runtime = build_runtime(experiment)
    # The intra-op threads each side computed with (docs/results.md, reproducibility).
    folder.writer.provenance["threads"] = {
        "server": runtime.server_threads,
        "client": runtime.client_cpus,
    }
    announced = runtime.announced_names(folder.run_dir)
    defense = Defense.build(experiment.defense, devices, side.example_counts(), announced)
    progress(f"{len(devices)} devices; waiting for their nodes")
    seating = runtime.seating(grid, experiment, folder.run_dir)
    traits = view.traits if view.population is not None else None
    kinds = kind_column(devices)
    fleet = FleetStrategy(algorithm, selector, ledger, seating, to_json(experiment), kinds, traits)
    # Selection and honest endings rest on these; the configured hooks come after them.
    # The update watch comes before the records: the summary names rounds without an update.
    always = [AvailabilityHook(view, ledger), LedgerHook(ledger), Signals(), folder.watch]
    parts = LoopParts(
        grid,
        fleet,
        build_close(experiment),
        side.evaluator(grid, fleet, runtime.round_timeout_s),
        [*always, *hooks],
        side.train_config(),
        side.arrays_key,
        runtime.round_timeout_s,
        view.available_at,
        runtime.wall_clock,
        defense,
    )
    return side, parts


@dataclass
class Folder:
    """The run folder: its writers, and the checkpoint a resumed run continues from."""

    run_dir: Path
    writer: RunWriter
    server_rounds: ServerRoundsWriter
    watch: UpdateWatch
    rows: RowsIntegrity
    resumed: checkpoint.Checkpoint | None

    @classmethod
    def open(cls, run_dir: Path, experiment: Experiment, num_devices: int, rounds: int) -> Folder:
        resumed = checkpoint.load(run_dir)
        rows = RowsIntegrity(run_dir / ROUNDS_CSV)
        if resumed is None:
            # A run killed before its first checkpoint starts over; what it wrote is kept aside.
            if set_aside(run_dir, (ROUNDS_CSV, SERVER_ROUNDS_CSV, SUMMARY_JSON)):
                progress("no checkpoint: starting over (earlier rows moved to *.interrupted-*)")
        else:
            if "integrity" in resumed.writer:
                rows.verify(resumed.writer["integrity"])
            check_resumable(run_dir, resumed, rounds)
        writer = RunWriter(
            run_dir,
            {"name": experiment.name, "num_devices": num_devices},
            accelerator=build_runtime(experiment).accelerator,
        )
        server_rounds = ServerRoundsWriter(run_dir)
        return cls(run_dir, writer, server_rounds, UpdateWatch(writer.meta), rows, resumed)

    def save(self, ckpt: checkpoint.Checkpoint) -> None:
        """Save `ckpt`; it vouches for rounds.csv as far as it was written."""
        mark = self.rows.advance(int(ckpt.writer["csv_bytes"]))
        checkpoint.save(self.run_dir, replace(ckpt, writer={**ckpt.writer, "integrity": mark}))

    def resume(self, run: Run) -> LoopState | None:
        """The state after the checkpoint's round, all of it restored (None: no checkpoint)."""
        ckpt = self.resumed
        if ckpt is None:
            return None
        run.selector.load_state_dict(ckpt.selector)
        checkpoint.import_data(run.algorithm, ckpt.algorithm)
        run.ledger.load_state_dict(ckpt.ledger)
        self.writer.load_state_dict(ckpt.writer)
        self.server_rounds.load_state_dict(ckpt.writer["server_rounds"])
        checkpoint.set_rng_state(ckpt.rng)
        self.watch.resume(self.run_dir, ckpt.round)
        state = LoopState(ckpt.round, ckpt.now_s, ckpt.model_version, ArrayRecord(ckpt.arrays))
        progress(f"resuming after round {state.round} (virtual {clock(state.now_s)})")
        return state

    def close(
        self, ending: Ending, run: Run | None, hooks: list[ServerHook], plots: bool
    ) -> dict[str, Any]:
        """The hooks' run end, then the summary marked with how the run ended (and figures)."""
        try:
            if run is not None:
                for hook in hooks:
                    hook.on_run_end(run, ending.status)
        finally:
            self.server_rounds.close()
            self.writer.meta["failure"] = ending.failure
            summary = self.writer.finish(ending.status, ending.error)
            interrupt.ended()  # a second Ctrl-C need not wait for the figures
        if plots:
            # Imported here: matplotlib stays out of the process until the run is over.
            from fedbench.analyze import analyze_finished

            analyze_finished(self.run_dir)
        return summary


def _loop(experiment: Experiment, parts: LoopParts, writer: RunWriter, run: Run) -> RoundLoop:
    """The run mode's loop of fedbench's own app, or the user's ServerApp on a FleetGrid.

    Both synchronous cases are one loop (AppLoop): fedbench's own app is one app
    among others (fedbench.server.own_app).
    """
    if experiment.app is None:
        return build_mode(experiment).loop(parts)

    def day_zero(metrics: dict[str, float]) -> None:
        _score_day_zero(metrics, writer, run, "the app's own")

    return AppLoop(parts, UserServerApp(experiment.app, run.run_dir), day_zero)


def _start(side: ServerSide, evaluator: Evaluator, writer: RunWriter, run: Run) -> LoopState:
    """The initial model, scored as round (or day) 0."""
    arrays, how = side.initial_arrays()
    # Which pretrained weights day 0 started from: equal hashes, equal starting points.
    writer.provenance["initial_model_sha256"] = state_sha256(arrays.to_torch_state_dict())
    _score_day_zero(evaluator(0, arrays), writer, run, how)
    return LoopState(0, 0.0, 0, arrays)


def _score_day_zero(first: dict[str, float], writer: RunWriter, run: Run, how: str) -> None:
    accuracy = accuracy_of(first)
    wall = time.perf_counter() - run.wall_start
    result = DayResult(0, 0, accuracy, loss_of(first), 0.0, wall, examples=examples_of(first))
    writer.day(result, accuracy_per_rate(first))
    shown = f"accuracy {100 * accuracy:.2f}%" if not math.isnan(accuracy) else "not evaluated"
    progress(f"{run.unit} 0: {shown} (initial model: {how})")


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


def _per_profile(devices: Fleet, indices: np.ndarray) -> dict[str, int]:
    """How many of the devices `indices` each profile has (profiles with none left out)."""
    counts = np.bincount(devices.profile_code[indices], minlength=len(devices.profile_names))
    return {p: int(c) for p, c in zip(devices.profile_names, counts, strict=True) if c}


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
        run_dir = Path(exp.output_dir)
        if experiment is not None or context.run_config.get(EXPERIMENT_KEY):
            # Asked to stop (fedbench.core.interrupt): the run's folder already says
            # `interrupted`; the thread ends quietly and the runtime shuts down.
            with contextlib.suppress(RunInterrupted):
                run_server(grid, exp, run_dir)  # `python -m fedbench` keeps the folder's files
            return
        with flwr_run_folder(exp, run_dir):
            run_server(grid, exp, run_dir)

    return app


@contextlib.contextmanager
def flwr_run_folder(experiment: Experiment, run_dir: Path) -> Iterator[None]:
    """What `python -m fedbench` gives its run folder, for a run `flwr run .` started.

    Nobody else writes them there: config.yaml (what ran, its secrets masked;
    kept on resume), console.log (what this ServerApp printed) and flower.log
    (Flower's log, which also still goes wherever Flower sends it: `flwr log`).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / "config.yaml"
    if not config.exists():
        config.write_text(config_yaml(experiment))
    console.attach(run_dir)
    handler = copy_flower_logs(run_dir)
    try:
        yield
    finally:
        FLOWER_LOGGER.removeHandler(handler)
        handler.close()
        console.detach(run_dir)


app = make_server_app()
