"""daily_accuracy trains for real through `python -m fedbench`: one device, per-day rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedbench.characterize import run_study
from fedbench.characterize.device import THIS, HostOptions
from fedbench.characterize.open import open_device
from fedbench.characterize.output import number, read_csv
from fedbench.characterize.registry import build_study
from fedbench.characterize.studies.daily_accuracy import DailyAccuracy, read_run
from fedbench.characterize.workloads import WorkloadBook


def test_command_is_a_fleet_of_one_device(tmp_path: Path) -> None:
    study = build_study("daily_accuracy", {"days": "2"})
    assert isinstance(study, DailyAccuracy)
    emulated = study.command(open_device("rpi4", WorkloadBook(2), HostOptions()), 16, tmp_path)
    assert emulated[1:3] == ["-m", "fedbench"] and "experiment=smoke" in emulated
    assert "fleet.devices=[{profile:rpi4,count:1}]" in emulated
    assert {"train.batch_size=16", "scenario.days=2", "strategy.clients_per_round=1"} <= set(
        emulated
    )
    host = study.command(open_device(THIS, WorkloadBook(2), HostOptions()), 4, tmp_path)
    assert "fleet.devices=[{profile:host,count:1}]" in host
    paper = build_study("daily_accuracy", {"quick": "false"})
    assert isinstance(paper, DailyAccuracy)
    assert "experiment=daily_densenet" in paper.command(
        open_device("rpi4", WorkloadBook(2), HostOptions()), 4, tmp_path
    )


def test_read_run_joins_accuracy_and_costs(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"accuracy_per_day": {"0": 0.5, "1": 0.6}}))
    with (tmp_path / "rounds.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, ["round", "day", "status", "latency_s", "energy_j", "peak_mem_mb"])
        w.writeheader()
        w.writerow(
            {
                "round": 1,
                "day": 1,
                "status": "ok",
                "latency_s": 2.5,
                "energy_j": "",
                "peak_mem_mb": 30,
            }
        )
    day0, day1 = read_run(tmp_path)
    assert day0["day"] == 0 and day0["status"] == "pretrained" and day0["accuracy"] == 0.5
    assert day1["train_latency_s"] == 2.5 and day1["peak_mem_mb"] == 30 and day1["status"] == "ok"
    assert day1["energy_j"] != day1["energy_j"]  # NaN: not measured


@pytest.mark.slow
def test_daily_accuracy_quick_run(tmp_path: Path) -> None:
    result = run_study("daily_accuracy", "jetson_tx2", {"batches": "8", "days": "1"}, tmp_path)
    rows = read_csv(result.csv)
    assert [r["day"] for r in rows] == ["0", "1"], rows
    assert all(0.0 < number(r["accuracy"]) <= 1.0 for r in rows)
    assert rows[1]["status"] == "ok" and number(rows[1]["train_latency_s"]) > 0
    assert number(rows[1]["energy_j"]) > 0  # an emulated device always has energy
    assert rows[0]["run_dir"] == "runs/bs8" and (tmp_path / "runs/bs8/summary.json").is_file()
    assert result.summary[0].startswith("batch 8: day 0")


def test_plot_puts_only_whole_days_on_the_day_axis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three days drawn by matplotlib's default locator get ticks at 0.5, 1.5, ..."""
    from fedbench.characterize.studies import daily_accuracy

    figures: list[object] = []
    monkeypatch.setattr(daily_accuracy, "save", lambda fig, path: figures.append(fig) or path)
    rows = [
        {"device": "rpi4", "batch_size": 16, "day": day, "accuracy": 0.9 + day / 100}
        for day in range(4)
    ]
    daily_accuracy.plot(rows, tmp_path / "daily_accuracy.png")
    (ax,) = figures[0].axes  # type: ignore[attr-defined]
    ticks = [t for t in ax.get_xticks() if 0 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)
