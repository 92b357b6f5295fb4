"""One short end-to-end run of a phone population: a trace drives availability for ten
virtual days; rounds.csv shows batteries drained by training and refilled by charging,
and server_rounds.csv counts the devices the floor took out."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from fedbench.population.traces import write_table
from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow

H = 3600.0


def _trace(path: Path) -> Path:
    rows: dict[str, list[object]] = {k: [] for k in ("device", "start_s", "end_s", "state")}

    def add(device: int, start_h: float, end_h: float, state: str) -> None:
        for key, value in zip(rows, (device, start_h * H, end_h * H, state), strict=True):
            rows[key].append(value)

    for d in range(6):  # charge every night, train on battery around noon
        add(d, 0, 6, "charging")
        add(d, 11, 13, "available")
    for d in range(6, 9):  # never charge: idle drain and training empty them
        add(d, 11, 13, "available")
    for d in range(9, 12):  # never available
        add(d, 0, 24, "unavailable")
    rows["period_s"] = [24 * H] * len(rows["device"])
    return write_table(path, rows)


def test_a_trace_drives_ten_days_of_batteries(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "availability.csv")
    run = tmp_path / "run"
    proc = run_fedbench(
        [
            "experiment=smoke",
            "fleet=phones_100",
            "+fleet.scale=12",
            f"fleet.population.trace.availability={trace}",
            # A known drain: never-charged devices last one day, not two.
            "fleet.population.battery.idle_w=0.3",
            "fleet.population.battery.idle_sigma=0",
            "fleet.population.battery.initial_min_pct=80",
            "strategy.clients_per_round=5",
            "scenario.days=10",
            "scenario.start_hour=11.5",
            "scenario.new_samples_per_day=16",
            "report.plots=false",
        ],
        run,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader((run / "rounds.csv").open()))
    servers = list(csv.DictReader((run / "server_rounds.csv").open()))
    names = sorted({r["device"] for r in rows})
    assert names and len(servers) == 10
    # Only devices the trace makes available train (never 9-11: the fleet's last three).
    index = {name: i for i, name in enumerate(_fleet_names(run))}
    assert all(index[n] < 9 for n in names), names
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(float(r["battery_pct"]) < float(r["battery_pct_start"]) for r in ok)
    # Charged overnight: a device 0-5 starts a later round higher than it ended an earlier one.
    recovered = False
    last_end: dict[str, float] = {}
    for r in sorted(ok, key=lambda r: int(r["round"])):
        name = r["device"]
        if index[name] < 6 and name in last_end and float(r["battery_pct_start"]) > last_end[name]:
            recovered = True
        last_end[name] = float(r["battery_pct"])
    assert recovered
    # The never-charged devices run below the floor: counted, and no longer available.
    low = [int(s["low_battery"]) for s in servers]
    available = [int(s["available"]) for s in servers]
    assert low[0] == 0 and max(low) >= 1 and low[-1] == 3, low
    assert available[0] == 9 and available[-1] == 6, available


def _fleet_names(run: Path) -> list[str]:
    from fedbench.experiment.fleet import expand_fleet

    return [d.name for d in expand_fleet({"name": run.name, "devices": _groups(), "scale": 12})]


def _groups() -> list[dict[str, object]]:
    import yaml

    from fedbench.paths import conf_dir

    return yaml.safe_load((conf_dir() / "fleet" / "phones_100.yaml").read_text())["devices"]
