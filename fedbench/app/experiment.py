"""The server's run: pretrain, then round after round select, train, aggregate, record.

One loop for every scenario and strategy. It keeps the virtual clock (a
round lasts as long as its slowest participant), feeds every RoundReport to
the ledger and the run folder, and evaluates the global model on the
held-out test split at the end of each day.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord
from flwr.serverapp import Grid
from hydra.utils import instantiate
from omegaconf import OmegaConf

from fedbench.app import checkpoint
from fedbench.app.client_app import build_model
from fedbench.app.fleet_view import FleetView
from fedbench.app.protocol import TrainTask
from fedbench.app.registry import register_fleet
from fedbench.app.strategy import FleetFedAvg
from fedbench.config import to_flower
from fedbench.devices.meter import DeviceState
from fedbench.fleet import expand_fleet
from fedbench.ledger import Ledger
from fedbench.report.records import RoundReport
from fedbench.report.writer import DayResult, RunWriter
from fedbench.scenarios.base import Scenario
from fedbench.scenarios.context import data_context
from fedbench.scenarios.pretrain import pretrained_state
from fedbench.train.loop import evaluate


def run_experiment(grid: Grid, experiment: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Run (or, if run_dir holds a checkpoint, continue) one experiment."""
    wall_start = time.perf_counter()
    devices = expand_fleet(experiment["fleet"])
    scenario: Scenario = instantiate(OmegaConf.create(experiment["scenario"]))
    selector = instantiate(OmegaConf.create(experiment["strategy"]))
    selector.check_fleet(len(devices))
    name = experiment.get("name") or experiment["model"]["name"]
    writer = RunWriter(run_dir, {"name": name, "num_devices": len(devices)})
    try:
        ctx = data_context(experiment, len(devices))
        model = build_model(experiment)
        ledger = Ledger(devices)
        view = FleetView(devices, experiment["fleet"].get("knobs"))
        view.predict(ledger, model, experiment, scenario, ctx)
        cannot = ledger.names(np.flatnonzero(ledger.pred_peak_mem_mb > ledger.mem_budget_mb))
        writer.meta["predicted_oom"] = cannot  # strategies do not pick them
        if cannot:
            _progress(
                f"{len(cannot)} device(s) cannot fit this training in memory and are "
                f"not picked: {', '.join(cannot[:8])}{' ...' if len(cannot) > 8 else ''}"
            )
        resumed = checkpoint.load(run_dir)
        if resumed is None:
            state, cached = pretrained_state(
                experiment, scenario.pretrain, ctx, lambda: build_model(experiment)
            )
            model.load_state_dict(state)
            how = "cache" if cached else f"{scenario.pretrain.epochs} epochs"
            _progress(f"pretrained {experiment['model']['name']} ({how})")
            loss, acc = evaluate(model, ctx.splits.test)
            writer.day(DayResult(0, 0, acc, loss, 0.0, time.perf_counter() - wall_start))
            _progress(f"day 0: accuracy {100 * acc:.2f}% (pretrained)")
            done, now_s = 0, 0.0
        else:
            model.load_state_dict(resumed.arrays)
            selector.load_state_dict(resumed.selector)
            ledger.load_state_dict(resumed.ledger)
            writer.load_state_dict(resumed.writer)
            checkpoint.set_rng_state(resumed.rng)
            done, now_s = resumed.round, resumed.now_s
            _progress(f"resuming after round {done} (virtual {_clock(now_s)})")
        record = to_flower(experiment)
        _progress(f"waiting for {len(devices)} devices")
        node_of = register_fleet(
            grid, devices, record, float(experiment["runtime"]["wait_for_nodes_s"])
        )
        deadline = experiment["train"].get("deadline_s")
        strategy = FleetFedAvg(selector, ledger, node_of, record, deadline)
        index_of = {d.name: d.index for d in devices}
        arrays = ArrayRecord(model.state_dict())
        timeout = float(experiment["runtime"]["round_timeout_s"])
        for spec in scenario.schedule():
            if spec.round <= done:
                continue
            now_s = max(now_s, spec.earliest_start_s)
            view.update_availability(ledger, now_s)
            task = TrainTask(spec.round, spec.day, -1, now_s, None)
            round_start = time.perf_counter()
            replies = grid.send_and_receive(
                list(strategy.configure_train(spec.round, arrays, task.to_config(), grid)),
                timeout=timeout,
            )
            new_arrays, _ = strategy.aggregate_train(spec.round, replies)
            round_wall = time.perf_counter() - round_start
            reports = strategy.reports
            writer.rounds(reports)
            ledger.record(reports, index_of)
            _carry_state(ledger, reports, index_of, now_s)
            now_s += _round_duration(reports, deadline)
            if new_arrays is not None:
                arrays = new_arrays
            if spec.evaluate:
                model.load_state_dict(arrays.to_torch_state_dict())
                loss, acc = evaluate(model, ctx.splits.test)
                wall = time.perf_counter() - wall_start
                writer.day(DayResult(spec.day, spec.round, acc, loss, now_s, wall, round_wall))
                ok = sum(r.status == "ok" for r in reports)
                _progress(
                    f"day {spec.day}: accuracy {100 * acc:.2f}% | round {spec.round} | "
                    f"{ok}/{len(reports)} devices ok | virtual {_clock(now_s)} | wall {wall:.0f}s"
                )
            checkpoint.save(
                run_dir,
                checkpoint.Checkpoint(
                    round=spec.round,
                    now_s=now_s,
                    arrays=arrays.to_torch_state_dict(),
                    selector=selector.state_dict(),
                    ledger=ledger.state_dict(),
                    writer=writer.state_dict(),
                    rng=checkpoint.rng_state(),
                ),
            )
    except BaseException as exc:
        writer.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    summary = writer.finish("completed")
    first, last = summary["day0_accuracy"], summary["final_accuracy"]
    _progress(
        f"done: day {summary['final_day']} accuracy {100 * last:.2f}% "
        f"vs day 0 {100 * first:.2f}% -> {run_dir}"
    )
    return summary


def _carry_state(
    ledger: Ledger, reports: list[RoundReport], index_of: dict[str, int], start_s: float
) -> None:
    """Keep each device's emulated temperature and battery for its next round."""
    for r in reports:
        if not math.isnan(r.temp_c_end):
            end = start_s + (0.0 if math.isnan(r.latency_s) else r.latency_s)
            ledger.set_state(index_of[r.device], DeviceState(r.temp_c_end, r.battery_pct, end))


def _round_duration(reports: list[RoundReport], deadline_s: float | None) -> float:
    """A round lasts as long as its slowest participant, or until the deadline."""
    times = [r.round_trip_s for r in reports if not math.isnan(r.round_trip_s)]
    longest = max(times, default=0.0)
    return longest if deadline_s is None else min(longest, float(deadline_s))


def _clock(seconds: float) -> str:
    days, rest = divmod(int(seconds), 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{days}d {h:02d}:{m:02d}:{s:02d}"


def _progress(line: str) -> None:
    print(f"[fedbench] {line}", file=sys.stderr, flush=True)
