"""The strategy-study analysis on run folders fabricated with fedbench's own RunWriter."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import yaml

from experiments.strategy_study.analyze import main
from fedbench.analyze import compare
from fedbench.analyze.runs import (
    NOT_PICKED,
    find_run_dirs,
    jain_index,
    load_run,
    load_runs,
    participation_fairness,
    time_to_target,
)
from fedbench.analyze.tables import (
    labels,
    mean_std,
    run_rows,
    strategy_rows,
    targets,
)
from fedbench.core.records import RoundReport
from fedbench.errors import FedbenchError
from fedbench.report.writer import DayResult, RunWriter

FLEET = {"name": "tiny", "devices": [{"profile": "rpi4", "count": 2}, {"profile": "pixel2"}]}
DEVICES = ("rpi4-000", "rpi4-001", "pixel2-000")
# round -> [(device, status, round_trip_s, energy_j)]; NaN = the report has no figure
ROUNDS: dict[int, list[tuple[str, str, float, float]]] = {
    1: [("rpi4-000", "ok", 3.0, 10.0), ("pixel2-000", "ok", 5.0, 4.0)],
    2: [("rpi4-000", "timeout", 9.0, 30.0), ("rpi4-001", "ok", 2.0, 6.0)],
    3: [("rpi4-000", "ok", 3.0, 10.0), ("pixel2-000", "dropped", math.nan, math.nan)],
}


def make_run(
    folder: Path,
    strategy: str = "random",
    seed: int = 0,
    accuracies: tuple[float, ...] = (0.2, 0.5, 0.8, 0.7),
    deadline_s: float | None = 6.0,
    rounds: dict[int, list[tuple[str, str, float, float]]] | None = None,
    name: str = "study_test",
    strategy_params: dict[str, object] | None = None,
    days: int | None = None,
    status: str = "completed",
) -> Path:
    """A run folder as fedbench writes it: config.yaml, rounds.csv and summary.json."""
    rounds = ROUNDS if rounds is None else rounds
    config = {
        "seed": seed,
        "fleet": FLEET,
        "strategy": {
            "_target_": f"strategies.{strategy}.Whatever",
            "clients_per_round": 2,
            "seed": seed,
            **(strategy_params or {}),
        },
        "scenario": {"_target_": "fedbench.scenarios.rounds.FederatedRounds", "rounds": days},
        "train": {"deadline_s": deadline_s},
        "runtime": {"ray_address": None},
        "output_dir": str(folder),
        "name": name,
    }
    writer = RunWriter(folder, {"name": name, "num_devices": len(DEVICES)})
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    writer.day(DayResult(0, 0, accuracies[0], 1.0, 0.0, 0.0))
    clock = 0.0
    for r, reports in sorted(rounds.items()):
        writer.rounds(
            [
                RoundReport(r, r, 0, d, d[:-4], "emulated", s, round_trip_s=t, energy_j=e)
                for d, s, t, e in reports
            ]
        )
        clock += 100.0  # the clock need not equal the summed round time (daily: nights)
        writer.day(DayResult(r, r, accuracies[r], 1.0, clock, 0.0))
    writer.finish(status)
    return folder


def test_time_and_energy_to_target_follow_the_server_rule(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path / "a"))
    # Round 1: slowest 5 s; round 2: the timeout's 9 s cut at the 6 s deadline; round 3: 3 s.
    assert [e.time_s for e in run.evaluations] == [0.0, 5.0, 11.0, 14.0]
    # Energy counts the timeout (30 J) and skips the dropped report's missing figure.
    assert [e.energy_j for e in run.evaluations] == [0.0, 14.0, 50.0, 60.0]
    hit = time_to_target(run, 0.75)
    assert hit.reached and hit.evaluation is not None
    assert (hit.evaluation.round, hit.time_s, hit.energy_j) == (2, 11.0, 50.0)
    assert hit.evaluation.clock_s == 200.0
    assert run.total_time_s == 14.0 and run.total_energy_j == 60.0
    assert run.status_counts == {"ok": 4, "oom": 0, "dropped": 1, "timeout": 1, "failed": 0}


def test_without_deadline_a_round_lasts_as_long_as_its_slowest_report(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path / "a", deadline_s=None))
    assert [e.time_s for e in run.evaluations] == [0.0, 5.0, 14.0, 17.0]


def test_the_first_crossing_counts_even_at_day_zero(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path / "a", accuracies=(0.9, 0.5, 0.95, 0.7)))
    assert time_to_target(run, 0.85).time_s == 0.0
    assert time_to_target(run, 0.92).evaluation.round == 2  # type: ignore[union-attr]


def test_a_target_never_reached_is_reported_as_not_reached(tmp_path: Path) -> None:
    fast = load_run(make_run(tmp_path / "a", seed=0, accuracies=(0.2, 0.9, 0.9, 0.9)))
    never = load_run(make_run(tmp_path / "b", seed=1, accuracies=(0.2, 0.3, 0.4, 0.5)))
    miss = time_to_target(never, 0.85)
    assert not miss.reached and math.isnan(miss.time_s) and math.isnan(miss.energy_j)
    (row,) = strategy_rows(run_rows([fast, never], {"study_test": 0.85}))
    assert (row.runs, row.reached) == (2, 1)
    # Averaged over the run that reached it only; one value has no std.
    assert row.time_to_target_s[0] == 5.0 and math.isnan(row.time_to_target_s[1])
    assert row.energy_to_target_j[0] == 14.0
    assert row.final_accuracy == pytest.approx((0.7, math.sqrt(0.08)))
    assert row.failures == {"oom": 0, "dropped": 2, "timeout": 2, "failed": 0}


def test_jain_index() -> None:
    assert jain_index([3, 3, 3]) == pytest.approx(1.0)
    assert jain_index([4, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    assert math.isnan(jain_index([0, 0]))


def test_participation_counts_every_device_of_the_fleet(tmp_path: Path) -> None:
    only = {1: [("rpi4-000", "ok", 1.0, 1.0)], 2: [], 3: []}
    run = load_run(make_run(tmp_path / "a", rounds=only))
    assert tuple(run.fleet.names()) == DEVICES
    assert participation_fairness(run) == pytest.approx(1 / 3)  # picked 1, 0, 0 times
    heat = run.picks.heat(run.fleet.size, run.rounds)
    assert heat.shape == (3, 3)  # rounds 2 and 3 had no report, still columns
    assert heat[0, 0] == 1 and (heat[1:] == NOT_PICKED).all()
    assert [e.time_s for e in run.evaluations] == [0.0, 1.0, 1.0, 1.0]


def test_target_is_a_fraction_of_the_best_mean_final_accuracy(tmp_path: Path) -> None:
    runs = [
        load_run(make_run(tmp_path / "r0", "random", 0, (0.1, 0.5, 0.6, 0.6))),
        load_run(make_run(tmp_path / "r1", "random", 1, (0.1, 0.5, 0.6, 0.8))),
        load_run(make_run(tmp_path / "h0", "heteroaware", 0, (0.1, 0.5, 0.6, 0.9))),
    ]
    assert targets(runs, 0.9) == {"study_test": pytest.approx(0.81)}
    assert targets(runs, 0.9, {"study_test": 0.5}) == {"study_test": 0.5}


def test_variants_of_one_strategy_are_kept_apart(tmp_path: Path) -> None:
    runs = [
        load_run(make_run(tmp_path / "a", "heteroaware", 0)),
        load_run(make_run(tmp_path / "b", "heteroaware", 1)),
        load_run(make_run(tmp_path / "c", "heteroaware", 0, strategy_params={"deadline_s": 4})),
        load_run(make_run(tmp_path / "d", "oort", 0)),
    ]
    named = labels(runs)
    # Seeds differ but are not a variant; the deadline is.
    assert sorted(named.values()) == [
        "heteroaware(deadline_s=4)",
        "heteroaware(deadline_s=None)",
        "heteroaware(deadline_s=None)",
        "oort",
    ]


def test_one_name_with_two_setups_is_two_experiments(tmp_path: Path) -> None:
    make_run(tmp_path / "a", days=3)
    make_run(tmp_path / "b", days=3, seed=1)
    make_run(tmp_path / "c", days=5)
    runs = load_runs(find_run_dirs([tmp_path]))
    names = [r.experiment for r in runs]
    assert all(n.startswith("study_test-") for n in names)
    assert sorted(names.count(n) for n in set(names)) == [1, 2]


def test_mean_std_ignores_nan() -> None:
    assert mean_std([1.0, math.nan, 3.0]) == pytest.approx((2.0, math.sqrt(2.0)))
    assert all(math.isnan(v) for v in mean_std([math.nan]))


def test_analyse_writes_tables_and_figures(tmp_path: Path) -> None:
    sweep = tmp_path / "multirun"
    for i, (strategy, seed) in enumerate([("random", 0), ("random", 1), ("heteroaware", 0)]):
        status = "failed" if i == 1 else "completed"
        make_run(sweep / str(i), strategy, seed, (0.2, 0.5, 0.8, 0.9 - 0.1 * i), status=status)
    out = tmp_path / "results"
    assert main([str(sweep), f"out={out}", "target.study_test=0.75"]) == 0
    for name in ("results.csv", "results.md", "runs.csv", "accuracy_per_day.csv"):
        assert (out / name).stat().st_size > 0
    for kind in ("accuracy_vs_time", "accuracy_vs_energy", "selection"):
        assert (out / f"study_test_{kind}.png").stat().st_size > 1000
    with (out / "results.csv").open() as f:
        rows = {r["strategy"]: r for r in csv.DictReader(f)}
    assert rows["random"]["reached"] == "2" and float(rows["random"]["target"]) == 0.75
    assert float(rows["heteroaware"]["time_to_target_s_mean"]) == 11.0
    text = (out / "results.md").read_text()
    assert "| random | 2/2 |" in text and "![study_test_selection.png]" in text
    assert "1 run(s) did not complete" in text and "random seed 1: failed (1)" in text


def test_analyse_refuses_a_folder_without_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(FedbenchError, match="no run folder"):
        compare(find_run_dirs([tmp_path]), tmp_path / "out")
    assert main([str(tmp_path)]) == 2
    assert "no run folder" in capsys.readouterr().err
    make_run(tmp_path / "a")
    assert main([str(tmp_path), "target.study_test=90"]) == 2
    assert "expected an accuracy in (0, 1]" in capsys.readouterr().err
