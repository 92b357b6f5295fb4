"""A synthetic run folder of a large fleet, written directly (no run): the analysis's scale tests.

The phone market-share fleet scaled to `devices`, `per_round` of them picked
each round at random, every status present (timeouts, drops, out-of-memory
and failures), energies, temperatures with throttling, memory peaks and
budgets: what the per-device figures draw, at a size where a row per device
cannot be drawn.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import yaml

from fedbench.experiment.fleet import expand_fleet
from fedbench.paths import conf_dir
from fedbench.report.records import CSV_FIELDS

RATES = (1.0, 0.5, 0.25, 0.125, 0.0625)  # HeteroFL's widths
STATUS_SHARE = {"ok": 0.88, "timeout": 0.04, "dropped": 0.04, "oom": 0.02, "failed": 0.02}


def phones(devices: int) -> dict[str, object]:
    groups = yaml.safe_load((conf_dir() / "fleet" / "phones_100.yaml").read_text())["devices"]
    return {"name": "phones_100", "devices": groups, "scale": devices}


def make_large_folder(
    folder: Path,
    devices: int,
    rounds: int,
    per_round: int,
    *,
    strategy: str = "random",
    seed: int = 0,
) -> Path:
    """config.yaml, rounds.csv, server_rounds.csv and summary.json of a fabricated run."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    fleet = phones(devices)
    spec = expand_fleet(fleet)
    config = {
        "seed": seed,
        "name": "large",
        "fleet": fleet,
        "strategy": {"_target_": f"strategies.{strategy}.X", "clients_per_round": per_round},
        "scenario": {"_target_": "fedbench.scenarios.rounds.FederatedRounds"},
        "train": {"deadline_s": None},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    statuses = list(STATUS_SHARE)
    clock, server_rows, days = 0.0, [], [_day(0, 0.1, 0.0)]
    with (folder / "rounds.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_FIELDS))
        writer.writeheader()
        for r in range(1, rounds + 1):
            picked = rng.choice(devices, size=per_round, replace=False)
            status = rng.choice(statuses, size=per_round, p=list(STATUS_SHARE.values()))
            trip = rng.lognormal(np.log(30.0), 0.5, per_round)
            duration = float(trip.max())
            for i, s, t in zip(picked.tolist(), status.tolist(), trip.tolist(), strict=True):
                d = spec[i]
                replied = s in ("ok", "timeout", "oom", "failed")
                temp0 = float(rng.uniform(25.0, 40.0))
                writer.writerow(
                    {
                        **dict.fromkeys(CSV_FIELDS, ""),
                        "round": r,
                        "day": r,
                        "node": 1,
                        "device": d.name,
                        "profile": d.profile,
                        "kind": "emulated",
                        "status": s,
                        "num_examples": 32,
                        "latency_s": 0.8 * t if replied else "",
                        "round_trip_s": t if replied else "",
                        "start_s": clock,
                        "end_s": clock + t if replied else "",
                        "energy_j": 2.5 * t if replied else "",
                        "peak_mem_mb": float(rng.uniform(400.0, 900.0)) if replied else "",
                        "mem_budget_mb": 3000.0,
                        "temp_c_start": temp0,
                        "temp_c_end": temp0 + float(rng.uniform(0.0, 30.0)),
                        "freq_ghz_avg": float(rng.uniform(1.2, 2.4)),
                        "throttled_frac": float(rng.random() < 0.1),
                        "model_version": r - 1,
                        "staleness": 0,
                    }
                )
            server_rows.append(
                {
                    "round": r,
                    "day": r,
                    "start_s": clock,
                    "duration_s": duration,
                    "end_s": clock + duration,
                    "picked": per_round,
                    "replied": int(np.isin(status, ["ok", "timeout", "oom", "failed"]).sum()),
                    "aggregated": int((status == "ok").sum()),
                    "close": "all",
                    "model_version": r,
                    "host_round_s": 1.0,
                }
            )
            clock += duration
            days.append(_day(r, 0.1 + 0.8 * r / rounds, clock))
    with (folder / "server_rounds.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(server_rows[0]))
        out.writeheader()
        out.writerows(server_rows)
    summary = {
        "name": "large",
        "num_devices": devices,
        "status": "completed",
        "days": days,
        # A submodel run's per-rate accuracy (docs/submodels.md): days x rates, whatever the fleet.
        "accuracy_per_rate": {
            str(r): {f"{rate:g}": (0.1 + 0.8 * r / rounds) * rate**0.1 for rate in RATES}
            for r in range(rounds + 1)
        },
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _day(r: int, accuracy: float, clock: float) -> dict[str, object]:
    return {"day": r, "round": r, "accuracy": accuracy, "virtual_time_s": clock}
