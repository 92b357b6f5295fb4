"""Paper 000 Fig 10: accuracy per day of daily fine-tuning, for several batch sizes.

This study trains for real: for each batch size it runs one fedbench
experiment (`python -m fedbench ...`, the daily scenario) with a fleet of
one device - the emulated profile, or `host` for `device=this` - and reads
the run folder's summary.json (accuracy per day) and rounds.csv (what each
day's training cost). The quick preset (default) is the small CNN on the
bundled digits for a few days, about half a minute per batch size; the
paper-size run (`quick=false`) is experiment=daily_densenet (DenseNet40,
64 new images a day, 17 days) on CIFAR-10, which takes hours on a small
host and needs the CIFAR-10 files (FEDBENCH_DATA).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fedbench.characterize.device import Device
from fedbench.characterize.output import (
    Row,
    StudyResult,
    fmt,
    legend,
    number,
    pyplot,
    save,
    write_csv,
)
from fedbench.characterize.studies.base import Study, positive
from fedbench.report.progress import console


@dataclass(frozen=True, kw_only=True)
class DailyAccuracy(Study):
    quick: bool
    batches: tuple[int, ...]
    quick_overrides: tuple[str, ...]
    paper_overrides: tuple[str, ...]
    days: int | None = None  # None: the preset's number of days
    timeout_s: int = 7200  # per run

    name: ClassVar[str] = "daily_accuracy"
    paper: ClassVar[str] = "paper 000 Fig 10 (DenseNet40, 64 images/day, 17 days, 3 batch sizes)"
    needs_workloads: ClassVar[bool] = False
    columns: ClassVar[dict[str, str]] = {
        "device": "profile name, or `this` (a fleet of one `host` device)",
        "kind": "`emulated` (profile costs) or `measured` (host wall clock)",
        "batch_size": "train.batch_size of the run",
        "day": "0 = the server-pretrained model, then each day of fine-tuning",
        "accuracy": "test accuracy after that day, fraction",
        "train_latency_s": "the device's training time that day, s (empty on day 0)",
        "energy_j": "the device's training energy that day, J (empty: not measured)",
        "peak_mem_mb": "the device's peak training memory that day, MB",
        "status": "the device's round status that day (`ok`, `oom`, ...), or the run's failure",
        "run_dir": "the fedbench run folder (config.yaml, rounds.csv, summary.json), "
        "relative to the study's folder",
    }

    def __post_init__(self) -> None:
        positive(self.batches, f"{self.name}.batches")
        if self.days is not None:
            positive((self.days,), f"{self.name}.days")

    def command(self, device: Device, batch: int, run_dir: Path) -> list[str]:
        preset = self.quick_overrides if self.quick else self.paper_overrides
        days = [f"scenario.days={self.days}"] if self.days is not None else []
        return [
            sys.executable,
            "-m",
            "fedbench",
            *preset,
            *days,
            f"train.batch_size={batch}",
            "fleet.name=characterize",
            f"fleet.devices=[{{profile:{device.fleet_profile},count:1}}]",
            "strategy.clients_per_round=1",
            f"hydra.run.dir={run_dir}",
        ]

    def run(self, device: Device, out: Path) -> StudyResult:
        rows: list[Row] = []
        with console.task(
            f"{self.name}: one run per batch size", len(self.batches), "runs"
        ) as task:
            for batch in self.batches:
                task.update(f"batch {batch}")
                run_dir = (out / "runs" / f"bs{batch}").resolve()
                # A previous run's folder (checkpoint, rounds.csv) would be
                # continued, not replaced: start each run from an empty folder.
                shutil.rmtree(run_dir, ignore_errors=True)
                proc = subprocess.run(
                    self.command(device, batch, run_dir),
                    capture_output=True,
                    text=True,
                    timeout=self.timeout_s,
                    env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
                )
                task.advance()
                base = {"device": device.name, "kind": device.kind, "batch_size": batch}
                where = str(run_dir.relative_to(out.resolve()))
                if proc.returncode != 0:
                    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                    rows.append(
                        {
                            **base,
                            "day": "",
                            "accuracy": math.nan,
                            "train_latency_s": math.nan,
                            "energy_j": math.nan,
                            "peak_mem_mb": math.nan,
                            "status": f"failed: {tail}",
                            "run_dir": where,
                        }
                    )
                    continue
                rows += [{**base, **r, "run_dir": where} for r in read_run(run_dir)]
        csv_path = write_csv(out / f"{self.name}.csv", self.columns, rows)
        fig = plot(rows, out / "daily_accuracy.png")
        return StudyResult(self.name, device.name, csv_path, (fig,), tuple(summarise(rows)))


def read_run(run_dir: Path) -> list[Row]:
    """One row per evaluated day: accuracy from summary.json, costs from rounds.csv."""
    summary = json.loads((run_dir / "summary.json").read_text())
    with (run_dir / "rounds.csv").open(newline="") as f:
        rounds = list(csv.DictReader(f))
    out: list[Row] = []
    for day, acc in summary["accuracy_per_day"].items():
        mine = [r for r in rounds if r["day"] == day]
        out.append(
            {
                "day": int(day),
                "accuracy": acc if acc is not None else math.nan,
                "train_latency_s": sum(number(r["latency_s"]) for r in mine) if mine else math.nan,
                "energy_j": sum(number(r["energy_j"]) for r in mine) if mine else math.nan,
                "peak_mem_mb": max(number(r["peak_mem_mb"]) for r in mine) if mine else math.nan,
                "status": ",".join(r["status"] for r in mine) if mine else "pretrained",
            }
        )
    return out


def summarise(rows: list[Row]) -> list[str]:
    lines = []
    for batch in dict.fromkeys(r["batch_size"] for r in rows):
        mine = [r for r in rows if r["batch_size"] == batch and r["day"] != ""]
        if not mine:
            failed = next(r["status"] for r in rows if r["batch_size"] == batch)
            lines.append(f"batch {batch}: {failed}")
            continue
        first, last = mine[0], mine[-1]
        lines.append(
            f"batch {batch}: day 0 {fmt(100 * first['accuracy'], '.2f')}% -> day {last['day']} "
            f"{fmt(100 * last['accuracy'], '.2f')}% (paper 000: 60.65% -> 61.32% over 17 days)"
        )
    return lines


def plot(rows: list[Row], path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for batch in dict.fromkeys(r["batch_size"] for r in rows):
        pts = [
            (r["day"], 100 * r["accuracy"])
            for r in rows
            if r["batch_size"] == batch and r["day"] != "" and math.isfinite(r["accuracy"])
        ]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"batch {batch}")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # days are whole: no day 2.5
    ax.set_xlabel("day")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(alpha=0.3)
    legend(ax)
    fig.suptitle(f"accuracy per day (paper 000 Fig 10) on {rows[0]['device']}")
    return save(fig, path)
