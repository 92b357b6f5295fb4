"""Run folders as fedbench writes them, small and by hand: today's schema and older ones.

`Device` rows become rounds.csv rows; `new_schema=True` adds the columns the
server writes for its virtual clock (start_s, end_s, model_version,
staleness) and a server_rounds.csv.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from fedbench.core.records import CSV_FIELDS

NEW_COLUMNS = ("start_s", "end_s", "model_version", "staleness")
FLEET = {
    "name": "tiny",
    "devices": [{"profile": "rpi4", "count": 2}, {"profile": "pixel2", "count": 1}],
}
DEVICES = ("rpi4-000", "rpi4-001", "pixel2-000")


@dataclass(frozen=True)
class Device:
    """One device's part in one round."""

    name: str
    status: str
    trip_s: float  # round trip (NaN: no reply)
    energy_j: float = math.nan
    temp: tuple[float, float] = (math.nan, math.nan)
    peak_mb: float = math.nan
    budget_mb: float = math.nan
    freq_ghz: float = math.nan
    start_s: float = 0.0  # when it got the model, relative to the round's start
    plan: str = ""
    needed_mb: float = math.nan  # plan_needed_mb: the full batch's need under a reduced plan
    model_rate: float = math.nan  # the submodel's width rate (algorithm=heterofl, ...)


def _cell(value: object) -> object:
    return "" if isinstance(value, float) and math.isnan(value) else value


def make_folder(
    folder: Path,
    rounds: dict[int, list[Device]],
    accuracies: dict[int, float],
    *,
    scenario: str = "rounds",
    strategy: str = "random",
    seed: int = 0,
    name: str = "tiny",
    status: str = "completed",
    deadline_s: float | None = None,
    new_schema: bool = True,
    pretrain_epochs: int = 0,
    kind: str = "emulated",
    server: dict[str, object] | None = None,
    per_rate: dict[str, dict[str, object]] | None = None,
) -> Path:
    """config.yaml, rounds.csv, summary.json (and server_rounds.csv with `new_schema`).

    `per_rate`: summary.json's `accuracy_per_rate` (day -> rate -> accuracy), as a
    submodel algorithm writes it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    target = {
        "daily": "fedbench.scenarios.daily.DailyScenario",
        "rounds": "fedbench.scenarios.rounds.FederatedRounds",
    }[scenario]
    config = {
        "seed": seed,
        "name": name,
        "fleet": FLEET,
        "strategy": {"_target_": f"strategies.{strategy}.X", "clients_per_round": 2, "seed": seed},
        "scenario": {"_target_": target, "pretrain": {"epochs": pretrain_epochs}},
        "train": {"deadline_s": deadline_s},
        **(server or {}),  # algorithm / mode / round_close groups
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    columns = list(CSV_FIELDS) + [c for c in NEW_COLUMNS if new_schema and c not in CSV_FIELDS]
    server_rows, clock, days = [], 0.0, []
    with (folder / "rounds.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for r, devices in sorted(rounds.items()):
            # The server waits from the round's start to the last reply (cut at the deadline).
            trips = [d.start_s + d.trip_s for d in devices if not math.isnan(d.trip_s)]
            longest = max(trips, default=0.0)
            duration = min(longest, deadline_s) if deadline_s is not None else longest
            for d in devices:
                row = {c: "" for c in columns}
                row.update(
                    round=r,
                    day=r,
                    node=1,
                    device=d.name,
                    profile=d.name[:-4],
                    kind=kind,
                    status=d.status,
                    num_examples=32,
                    round_trip_s=_cell(d.trip_s),
                    latency_s=_cell(d.trip_s * 0.8),
                    energy_j=_cell(d.energy_j),
                    temp_c_start=_cell(d.temp[0]),
                    temp_c_end=_cell(d.temp[1]),
                    peak_mem_mb=_cell(d.peak_mb),
                    mem_budget_mb=_cell(d.budget_mb),
                    plan=d.plan,
                    plan_needed_mb=_cell(d.needed_mb),
                    freq_ghz_avg=_cell(d.freq_ghz),
                    model_rate=_cell(d.model_rate),
                )
                if new_schema:
                    end = clock + d.start_s + d.trip_s
                    row.update(
                        start_s=clock + d.start_s,
                        end_s=_cell(end),
                        model_version=r - 1,
                        staleness=0,
                    )
                writer.writerow(row)
            server_rows.append(
                {
                    "round": r,
                    "day": r,
                    "start_s": clock,
                    "duration_s": duration,
                    "end_s": clock + duration,
                    "picked": len(devices),
                    "replied": sum(d.status in ("ok", "timeout") for d in devices),
                    "aggregated": sum(d.status == "ok" for d in devices),
                    "close": "deadline" if deadline_s and longest > deadline_s else "all",
                    "model_version": r,
                    "host_round_s": 0.5,
                }
            )
            clock += duration + (86_400 - duration if scenario == "daily" else 0.0)
            if r in accuracies:
                days.append(_day(r, accuracies[r], clock))
    if new_schema:
        with (folder / "server_rounds.csv").open("w", newline="") as f:
            writer = csv.DictWriter(
                f, fieldnames=list(server_rows[0]) if server_rows else ["round"]
            )
            writer.writeheader()
            writer.writerows(server_rows)
    if 0 in accuracies:
        days.insert(0, _day(0, accuracies[0], 0.0))
    summary = {
        "name": name,
        "num_devices": len(DEVICES),
        "status": status,
        "error": "" if status == "completed" else "RuntimeError: boom",
        "days": days,
        "accuracy_per_day": {str(d["day"]): d["accuracy"] for d in days},
        "totals": {"host_wall_s": 3.0},
    }
    if per_rate is not None:
        summary["accuracy_per_rate"] = per_rate
        summary["final_accuracy_per_rate"] = next(reversed(per_rate.values()), {})
    mode = (server or {}).get("mode")
    if isinstance(mode, dict) and "FedBuff" in str(mode.get("_target_")):
        summary["async"] = {"mode": "fedbuff", "buffer_size": mode.get("buffer_size")}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _day(r: int, accuracy: float, clock: float) -> dict[str, object]:
    return {
        "day": r,
        "round": r,
        "accuracy": accuracy,
        "loss": 1.0 - accuracy,
        "virtual_time_s": clock,
        "host_wall_s": float(r),
        "round_wall_s": 0.5,
    }


def emulated_rounds() -> dict[int, list[Device]]:
    """Three rounds of an emulated fleet: a timeout, a dropped device, a throttled Pi."""
    return {
        1: [
            Device("rpi4-000", "ok", 3.0, 10.0, (40.0, 52.0), 120.0, 3400.0, 1.5),
            Device("pixel2-000", "ok", 5.0, 4.0, (30.0, 33.0), 110.0, 2000.0, 2.4, 0.2),
        ],
        2: [
            Device("rpi4-000", "timeout", 9.0, 30.0, (45.0, 80.0), 120.0, 3400.0, 1.2),
            Device("rpi4-001", "ok", 2.0, 6.0, (40.0, 47.0), 120.0, 3400.0, 1.5),
        ],
        3: [
            Device("rpi4-000", "ok", 3.0, 10.0, (50.0, 60.0), 120.0, 3400.0, 1.5),
            Device("pixel2-000", "dropped", math.nan),
        ],
    }
