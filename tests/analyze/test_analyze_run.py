"""fedbench.analyze on one run folder: rounds_summary.csv and the figures, for today's
schema, older folders, failed runs and rounds in which every device failed."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from matplotlib.figure import Figure

import fedbench.analyze.figures_fleet as figures_fleet
from fedbench.analyze import RUN_FIGURES, analyze_finished, analyze_run, load_run
from fedbench.analyze.figures_run import start_label, step_name
from fedbench.analyze.rounds import ROUNDS_SUMMARY_COLUMNS, rounds_summary
from fedbench.analyze.runs import participation_fairness
from fedbench.core.records import RoundReport
from fedbench.report.writer import DayResult, RunWriter
from tests.analyze.folders import DEVICES, Device, emulated_rounds, make_folder

ACCURACY = {0: 0.1, 1: 0.4, 2: 0.5, 3: 0.7}
# summary.json's accuracy_per_rate of a HeteroFL run over those rounds (rate 1: ACCURACY).
PER_RATE: dict[str, dict[str, object]] = {
    str(r): {"1": a, "0.5": a - 0.05, "0.25": a - 0.1, "0.0625": a - 0.2}
    for r, a in ACCURACY.items()
}


def summary_rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "rounds_summary.csv").open() as f:
        return list(csv.DictReader(f))


def figures(folder: Path) -> set[str]:
    return {p.name for p in (folder / "figures").iterdir()}


def analyse(folder: Path) -> list[Path]:
    """PNG only: the PDFs are the same figures (tested once, below)."""
    return analyze_run(folder, formats=("png",))


def test_new_schema_uses_the_servers_clock(tmp_path: Path) -> None:
    run = make_folder(
        tmp_path / "a", emulated_rounds(), ACCURACY, deadline_s=6.0, per_rate=PER_RATE
    )
    written = analyze_run(run)  # PNG and PDF
    rows = summary_rows(run)
    assert list(rows[0]) == list(ROUNDS_SUMMARY_COLUMNS)
    assert [r["round"] for r in rows] == ["1", "2", "3"]
    # Round 2: the Pi's 9 s reply was cut at the 6 s deadline by the server.
    assert [float(r["duration_s"]) for r in rows] == [5.2, 6.0, 3.0]
    assert rows[1]["close"] == "deadline" and rows[0]["close"] == "all"
    assert [float(r["end_s"]) for r in rows] == [5.2, 11.2, 14.2]
    assert (rows[1]["ok"], rows[1]["timeout"], rows[2]["dropped"]) == ("1", "1", "1")
    # Energy: the timeout's 30 J counts; the dropped device has no figure, not 0 J.
    assert [float(r["energy_j"]) for r in rows] == [14.0, 36.0, 10.0]
    assert rows[2]["energy_unknown"] == "1" and float(rows[2]["cumulative_energy_j"]) == 60.0
    assert float(rows[2]["accuracy"]) == 0.7 and rows[0]["staleness_mean"] == "0.0"
    assert figures(run) == {f"{n}.{ext}" for n in RUN_FIGURES for ext in ("png", "pdf")}
    assert all(p.stat().st_size > 1000 for p in written if p.parent.name == "figures")


def test_an_older_folder_without_the_servers_columns(tmp_path: Path) -> None:
    run = make_folder(
        tmp_path / "old", emulated_rounds(), ACCURACY, deadline_s=6.0, new_schema=False
    )
    analyse(run)
    rows = summary_rows(run)
    # The server's rule then: the slowest round trip, cut at the deadline.
    assert [float(r["duration_s"]) for r in rows] == [5.0, 6.0, 3.0]
    assert rows[0]["replied"] == "" and rows[0]["close"] == ""  # not recorded: empty, not 0
    assert rows[0]["aggregated"] == "2"
    assert "timeline.png" in figures(run)


def test_a_run_that_failed_before_any_round(tmp_path: Path) -> None:
    run = make_folder(tmp_path / "f", {}, {0: 0.1}, status="failed")
    written = analyse(run)
    assert summary_rows(run) == []
    # No round: only the accuracy figure has data.
    assert figures(run) == {"accuracy.png"}
    assert written[0].name == "rounds_summary.csv"


def test_a_run_folder_with_no_evaluation_at_all(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "x", "num_devices": 1})
    writer.finish("failed", "RuntimeError: before day 0")
    analyze_finished(tmp_path)  # what the server runs after it
    assert summary_rows(tmp_path) == [] and not (tmp_path / "figures").exists()


def test_rounds_where_every_device_failed(tmp_path: Path) -> None:
    rounds = {
        1: [Device("rpi4-000", "failed", math.nan), Device("rpi4-001", "oom", math.nan)],
        2: [Device("pixel2-000", "dropped", math.nan)],
    }
    run = make_folder(tmp_path / "x", rounds, {0: 0.1, 1: 0.1, 2: 0.1})
    analyse(run)
    rows = summary_rows(run)
    assert [r["aggregated"] for r in rows] == ["0", "0"]
    assert [r["energy_j"] for r in rows] == ["", ""] and rows[1]["cumulative_energy_j"] == ""
    assert {"timeline.png", "fairness.png", "accuracy_vs_time.png"} <= figures(run)
    assert "accuracy_vs_energy.png" not in figures(run)  # nothing measured energy


def test_host_devices_without_sensors_get_no_energy_or_thermal_figures(tmp_path: Path) -> None:
    rounds = {1: [Device("rpi4-000", "ok", 2.0), Device("rpi4-001", "ok", 3.0)]}
    run = make_folder(tmp_path / "h", rounds, {0: 0.1, 1: 0.3}, kind="host")
    analyse(run)
    assert not {"thermal.png", "energy_per_device.png", "memory.png"} & figures(run)
    loaded = load_run(run)
    assert math.isnan(loaded.total_energy_j) and not loaded.energy_known


def test_daily_runs_are_labelled_by_day_and_rounds_runs_by_round(tmp_path: Path) -> None:
    daily = load_run(
        make_folder(
            tmp_path / "d", emulated_rounds(), ACCURACY, scenario="daily", pretrain_epochs=3
        )
    )
    plain = load_run(make_folder(tmp_path / "r", emulated_rounds(), ACCURACY))
    assert (step_name(daily), start_label(daily)) == ("day", "day 0 (pretrained)")
    assert (step_name(plain), start_label(plain)) == ("round", "round 0 (initial model)")
    # The daily clock counts the nights; time in rounds does not.
    assert daily.evaluations[-1].clock_s > 2 * 86_400
    assert daily.evaluations[-1].time_s == pytest.approx(5.2 + 9.0 + 3.0)  # no deadline


def test_fairness_counts_every_device_of_the_fleet(tmp_path: Path) -> None:
    run = load_run(make_folder(tmp_path / "a", emulated_rounds(), ACCURACY))
    assert run.fleet.size == len(DEVICES) and tuple(run.fleet.names()) == DEVICES
    # Picked 3, 1 and 2 times.
    assert participation_fairness(run) == pytest.approx(36 / 42)


def test_a_finished_run_is_analysed(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "w", "num_devices": 2})
    writer.day(DayResult(0, 0, 0.2, 2.0, 0.0, 0.1))
    writer.rounds(
        [
            RoundReport(
                1,
                1,
                1,
                "rpi4-000",
                "rpi4",
                "emulated",
                "ok",
                round_trip_s=2.0,
                energy_j=3.0,
                temp_c_start=40.0,
                temp_c_end=44.0,
            ),
            RoundReport(1, 1, 2, "rpi4-001", "rpi4", "emulated", "timeout", round_trip_s=9.0),
        ]
    )
    writer.day(DayResult(1, 1, 0.3, 1.5, 9.0, 1.0, 0.8))
    writer.finish("completed")
    analyze_finished(tmp_path)  # what the server runs after it (report.plots=true)
    assert {"accuracy.png", "timeline.pdf", "thermal.png"} <= figures(tmp_path)
    (row,) = rounds_summary(load_run(tmp_path))
    assert (row["picked"], row["ok"], row["timeout"], row["energy_j"]) == (2, 1, 1, 3.0)


def test_the_writer_alone_writes_no_figures(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "w", "num_devices": 1})
    writer.day(DayResult(0, 0, 0.2, 2.0, 0.0, 0.1))
    writer.finish("completed")
    assert not (tmp_path / "figures").exists()


def test_a_new_null_key_does_not_split_old_runs_from_new() -> None:
    from fedbench.analyze.runs import setup_hash

    old = {"seed": 0, "fleet": {"name": "edge_mixed", "scale": 100}}
    new = {"seed": 1, "fleet": {"name": "edge_mixed", "scale": 100, "population": None}}
    assert setup_hash(old) == setup_hash(new)
    other = {"seed": 0, "fleet": {"name": "edge_mixed", "scale": 20}}
    assert setup_hash(other) != setup_hash(old)


def test_the_thermal_figure_numbers_days_as_every_other_figure(tmp_path: Path) -> None:
    """Day d's trainings lie in [d, d + 1) (the clock's day 1 starts at 0 s: it said 0-16)."""
    from matplotlib.collections import PathCollection

    from fedbench.analyze.figures_devices import thermal

    # make_folder's daily clock: day d starts (d - 1) days in, as the daily scenario's
    make_folder(tmp_path, emulated_rounds(), {0: 0.1, 3: 0.5}, scenario="daily")
    figure = thermal(load_run(tmp_path))
    assert not isinstance(figure, str)
    top, bottom = figure.axes[:2]
    marks = [c for c in top.collections if isinstance(c, PathCollection)]  # training ends
    xs = sorted(x for c in marks for x in c.get_offsets()[:, 0])
    assert len(xs) >= 4 and 1.0 < xs[0] < 2.0 and 3.0 < xs[-1] < 4.0
    assert bottom.get_xlabel().startswith("day")


def test_an_app_runs_figures_name_the_app(tmp_path: Path) -> None:
    """The titles said "tiny (random, seed 0)" for a user's app, naming no app."""
    from fedbench.analyze.figures_run import accuracy

    app = {"name": "quickstart-pytorch", "root": "/apps/qs", "clientapp": "task:app"}
    make_folder(tmp_path, emulated_rounds(), {0: 0.1, 3: 0.5}, server={"app": app})
    figure = accuracy(load_run(tmp_path))
    assert not isinstance(figure, str)
    assert "tiny (app quickstart-pytorch, random, seed 0)" in figure.axes[0].get_title()


def _needed_markers(figure: object) -> list[tuple[float, float]]:
    """(x, y) of the 'full batch would need' markers, and the legend says what they are."""
    assert isinstance(figure, Figure), figure
    (ax,) = figure.axes
    found = [c for c in ax.collections if c.get_label() == "full batch would need"]
    legends = [
        t.get_text() for leg in figure.legends + [ax.get_legend()] if leg for t in leg.get_texts()
    ]
    assert bool(found) == any(t.startswith("full batch would need") for t in legends), legends
    return [tuple(xy) for c in found for xy in c.get_offsets()]


def test_memory_draws_what_the_full_batch_would_need_under_a_reduced_plan(tmp_path: Path) -> None:
    """A device far under its budget that ran micro-batches shows what forced the plan."""
    rounds = {
        1: [
            Device(
                "pixel2-000",
                "ok",
                5.0,
                4.0,
                peak_mb=300.0,
                budget_mb=2000.0,
                plan="8x2",
                needed_mb=2600.0,
            ),
            Device("rpi4-000", "ok", 3.0, 10.0, peak_mb=120.0, budget_mb=3400.0, plan="bs16"),
        ],
        2: [
            Device(
                "pixel2-000",
                "ok",
                5.0,
                4.0,
                peak_mb=310.0,
                budget_mb=2000.0,
                plan="4x4 vmap2",
                needed_mb=2500.0,
            ),
        ],
    }
    run = load_run(make_folder(tmp_path / "m", rounds, {0: 0.1, 1: 0.2, 2: 0.3}))
    figure = RUN_FIGURES["memory"](run)
    # One marker, for the Pixel (its largest need), none for the Pi that ran its full batch.
    ((x, _),) = _needed_markers(figure)
    assert x == 2600.0
    assert isinstance(figure, Figure)
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert "pixel2-000 (ran 4x4, 8x2)" in labels and "rpi4-000" in labels
    # Per profile (a large fleet): the same marker at the profile's largest need.
    peak, budget = {"pixel2-000": 310.0, "rpi4-000": 120.0}, {"pixel2-000": 2000.0}
    fleet = figures_fleet.memory(run, peak, budget, {}, {"pixel2-000": 2600.0})
    assert [x for x, _ in _needed_markers(fleet)] == [2600.0]
    assert _needed_markers(figures_fleet.memory(run, peak, budget, {})) == []


def test_memory_of_full_batch_rounds_draws_no_need(tmp_path: Path) -> None:
    rounds = {1: [Device("rpi4-000", "ok", 3.0, 10.0, peak_mb=120.0, budget_mb=3400.0)]}
    run = load_run(make_folder(tmp_path / "f", rounds, {0: 0.1, 1: 0.2}))
    assert _needed_markers(RUN_FIGURES["memory"](run)) == []


def _lines(figure: object) -> dict[str, tuple[list[float], list[float]]]:
    """Legend label -> (x, y) of each line of a one-axes figure."""
    assert isinstance(figure, Figure), figure
    (ax,) = figure.axes
    return {
        str(line.get_label()): (list(line.get_xdata()), list(line.get_ydata()))  # type: ignore[arg-type]
        for line in ax.get_lines()
    }


def test_a_submodel_run_draws_a_line_per_width_rate(tmp_path: Path) -> None:
    run = make_folder(tmp_path / "h", emulated_rounds(), ACCURACY, per_rate=PER_RATE)
    figure = RUN_FIGURES["accuracy_per_rate"](load_run(run))
    lines = _lines(figure)
    # The legend top down from the whole model; rates as the fractions HeteroFL names them.
    assert list(lines) == ["1 (whole model)", "1/2", "1/4", "1/16"]
    assert lines["1/2"][0] == [0, 1, 2, 3]  # round 0, the initial model, included
    assert lines["1/2"][1][2] == pytest.approx(45.0)  # round 2: 0.5 - 0.05
    assert lines["1 (whole model)"][1] == pytest.approx([10.0, 40.0, 50.0, 70.0])
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    widths = {str(line.get_label()): line.get_linewidth() for line in ax.get_lines()}
    assert widths["1 (whole model)"] > max(w for k, w in widths.items() if k != "1 (whole model)")
    assert ax.get_xlabel() == "round" and "accuracy of each width rate" in ax.get_title()
    written = analyse(run)
    assert run / "figures" / "accuracy_per_rate.png" in written


def test_each_rates_legend_says_how_many_device_rounds_trained_it(tmp_path: Path) -> None:
    """A rate no device trained is only evaluated: the legend says so (rounds.csv model_rate)."""
    rounds = {
        1: [
            Device("rpi4-000", "ok", 3.0, model_rate=0.5),
            Device("pixel2-000", "ok", 5.0, model_rate=1.0),
        ],
        2: [
            Device("rpi4-000", "timeout", 9.0, model_rate=0.5),  # not aggregated: not counted
            Device("rpi4-001", "ok", 2.0, model_rate=0.5),
        ],
    }
    heterofl = {"_target_": "fedbench.algorithms.heterofl.HeteroFL", "rate_policy": "budget"}
    run = make_folder(
        tmp_path / "t",
        rounds,
        {0: 0.1, 1: 0.4, 2: 0.5},
        per_rate={r: PER_RATE[r] for r in ("0", "1", "2")},
        server={"algorithm": heterofl},
    )
    figure = RUN_FIGURES["accuracy_per_rate"](load_run(run))
    assert list(_lines(figure)) == ["1 (whole model): 1", "1/2: 2", "1/4: 0", "1/16: 0"]
    assert isinstance(figure, Figure)
    assert "heterofl, rates by budget: accuracy of each width rate" in figure.axes[0].get_title()


def test_per_rate_accuracy_draws_what_a_partial_summary_holds(tmp_path: Path) -> None:
    """A resumed run from an old checkpoint lacks early days; a rate may miss a day,
    an accuracy may be null and a key damaged: what exists is drawn, nothing crashes."""
    per_rate: dict[str, dict[str, object]] = {
        "2": {"1": 0.5, "0.5": 0.45, "0.25": None},
        "3": {"1": 0.7, "0.25": 0.6, "abc": 0.9, "0.5": "n/a"},
        "x": {"1": 0.1},
        "4": "not a mapping",  # type: ignore[dict-item]
    }
    run = make_folder(tmp_path / "p", emulated_rounds(), ACCURACY, per_rate=per_rate)
    lines = _lines(RUN_FIGURES["accuracy_per_rate"](load_run(run)))
    assert lines == {
        "1 (whole model)": ([2, 3], pytest.approx([50.0, 70.0])),
        "1/2": ([2], pytest.approx([45.0])),
        "1/4": ([3], pytest.approx([60.0])),
    }


def test_a_daily_submodel_run_draws_rates_per_day(tmp_path: Path) -> None:
    run = make_folder(
        tmp_path / "d", emulated_rounds(), ACCURACY, scenario="daily", per_rate=PER_RATE
    )
    figure = RUN_FIGURES["accuracy_per_rate"](load_run(run))
    assert isinstance(figure, Figure) and figure.axes[0].get_xlabel() == "day"
    assert _lines(figure)["1/4"][0] == [0, 1, 2, 3]


def test_a_fedavg_run_says_why_it_has_no_per_rate_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_folder(tmp_path / "f", emulated_rounds(), ACCURACY)
    reason = RUN_FIGURES["accuracy_per_rate"](load_run(run))
    assert reason == "not a submodel run (algorithm=heterofl, fjord or fedrolex: docs/submodels.md)"
    written = analyse(run)
    assert "accuracy_per_rate.png" not in {p.name for p in written}
    assert f"not drawn: accuracy_per_rate ({reason})" in capsys.readouterr().out


def test_wilson_interval_of_an_accuracy() -> None:
    from fedbench.analyze.figures_run import wilson_interval

    lo, hi = wilson_interval(0.5, 100)
    assert (round(lo, 3), round(hi, 3)) == (0.404, 0.596)
    lo, hi = wilson_interval(1.0, 20)  # stays inside [0, 1], unlike p +- z*se
    assert hi == pytest.approx(1.0) and 0.8 < lo < 0.85
    assert all(math.isnan(v) for v in wilson_interval(0.9, math.nan))


def test_the_accuracy_figure_draws_the_binomial_interval_when_the_split_is_known(
    tmp_path: Path,
) -> None:
    import json

    from fedbench.analyze.figures_run import accuracy

    folder = make_folder(tmp_path / "r", emulated_rounds(), ACCURACY)
    plain = accuracy(load_run(folder))
    assert isinstance(plain, Figure) and not plain.axes[0].collections  # unknown n: no band
    summary = json.loads((folder / "summary.json").read_text())
    for day in summary["days"]:
        day["examples"] = 539
    (folder / "summary.json").write_text(json.dumps(summary))
    run = load_run(folder)
    assert {e.examples for e in run.evaluations} == {539}
    figure = accuracy(run)
    assert isinstance(figure, Figure)
    (band,) = figure.axes[0].collections
    assert "binomial 95% interval (539 test examples)" in band.get_label()
