"""Runs side by side: the table (mean ± sd over seeds), the figures, and the command."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.analyze import compare, find_run_dirs
from fedbench.analyze.cli import main
from fedbench.analyze.style import STRATEGY_COLOURS, strategy_styles
from fedbench.errors import FedbenchError
from tests.analyze.folders import emulated_rounds, make_folder


def sweep(root: Path) -> Path:
    """random and oort, two seeds each, one of oort's failed half-way."""
    for i, (strategy, seed, final) in enumerate(
        [("random", 0, 0.6), ("random", 1, 0.7), ("oort", 0, 0.8), ("oort", 1, 0.75)]
    ):
        status = "failed" if i == 3 else "completed"
        make_folder(
            root / str(i),
            emulated_rounds(),
            {0: 0.1, 1: 0.4, 2: 0.55, 3: final},
            strategy=strategy,
            seed=seed,
            status=status,
            deadline_s=6.0,
        )
    return root


def test_compare_writes_the_table_and_the_side_by_side_figures(tmp_path: Path) -> None:
    runs = find_run_dirs([sweep(tmp_path / "multirun")])
    out = tmp_path / "analysis"
    table = compare(runs, out, formats=("png",))
    # Target: 0.95 x oort's mean final accuracy (0.775) = 73.6%: only oort gets there, in
    # round 3 (14.2 virtual s, 60 J); no ratio to random, which never does.
    assert "Target accuracy 73.6%" in table
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    oort = "| oort | 2/2 | 3.0 ± 0.0 | 14.2 ± 0.0 | 60.0 ± 0.0 | - | - | 77.5 ± 3.5 |"
    assert lines["oort"].startswith(oort)
    assert lines["random"].startswith("| random | 0/2 | - | - | - | - | - | 65.0 ± 7.1 |")
    for kind in ("accuracy_vs_time", "accuracy_vs_energy", "accuracy_vs_step", "to_target"):
        assert (out / f"tiny_{kind}.png").stat().st_size > 1000
    assert (out / "tiny_selection.png").is_file()
    text = (out / "results.md").read_text()
    assert "1 run(s) did not complete" in text and "![tiny_to_target.png]" in text
    with (out / "runs.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 4


def test_a_sweep_over_another_parameter_is_split_by_what_differs(tmp_path: Path) -> None:
    make_folder(tmp_path / "a", emulated_rounds(), {0: 0.1, 3: 0.5}, deadline_s=6.0)
    make_folder(tmp_path / "b", emulated_rounds(), {0: 0.1, 3: 0.6}, deadline_s=3.0)
    table = compare(find_run_dirs([tmp_path]), None, target=0.45)
    assert "## tiny-train.deadline_s=6.0" in table and "## tiny-train.deadline_s=3.0" in table
    # One target for every experiment, whatever the split named them.
    assert table.count("Target accuracy 45.0% (fixed)") == 2


def test_sync_and_fedbuff_runs_are_arms_of_one_comparison(tmp_path: Path) -> None:
    """Mode and round close label the runs, like strategies; they never split the experiment."""
    sync = "fedbench.server.modes.Synchronous"
    arms = {
        "all": {"mode": {"_target_": sync}, "round_close": {"_target_": "x.close.WaitForAll"}},
        "deadline": {
            "mode": {"_target_": sync},
            "round_close": {"_target_": "x.close.Deadline", "deadline_s": 1.5},
        },
        "fedbuff": {  # its round_close did nothing (an async run) and must not label it
            "mode": {"_target_": "fedbench.server.fedbuff.FedBuff", "buffer_size": 5},
            "round_close": {"_target_": "x.close.Deadline", "deadline_s": 1.5},
        },
    }
    for name, server in arms.items():
        for seed in (0, 1):
            make_folder(
                tmp_path / f"{name}{seed}",
                emulated_rounds(),
                {0: 0.1, 3: 0.5 + 0.1 * seed},
                seed=seed,
                server=server,
            )
    table = compare(find_run_dirs([tmp_path]), None, target=0.45)
    assert table.count("## tiny") == 1  # one experiment, three arms
    rows = [line for line in table.splitlines() if line.startswith("| random")]
    labels = sorted(line.split(" | ")[0].strip("| ") for line in rows)
    assert labels == [
        "random [fedbuff]",
        "random [synchronous, deadline]",
        "random [synchronous, waitforall]",
    ]
    assert all(" | 2/2 | " in line for line in rows)  # two seeds averaged per arm


def test_a_strategy_keeps_its_colour_in_every_figure() -> None:
    alone = strategy_styles(["oort"])
    crowd = strategy_styles(["random", "oort", "heteroaware", "heteroaware(deadline_s=1.3)"])
    assert alone["oort"]["color"] == crowd["oort"]["color"] == STRATEGY_COLOURS["oort"]
    variant, default = crowd["heteroaware(deadline_s=1.3)"], crowd["heteroaware"]
    assert variant["color"] == default["color"] and variant["linestyle"] != default["linestyle"]
    assert strategy_styles(["mine"])["mine"]["color"] not in STRATEGY_COLOURS.values()


def test_the_command_takes_globs_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep(tmp_path / "s")
    monkeypatch.chdir(tmp_path)
    assert main(["s/*", "target=0.5", "formats=png"]) == 0
    out = capsys.readouterr().out
    assert "Target accuracy 50.0% (fixed)" in out and "| oort | 2/2 |" in out
    assert (tmp_path / "s" / "analysis" / "results.md").is_file()  # next to the runs
    assert (tmp_path / "s" / "0" / "figures" / "timeline.png").is_file()  # was missing: drawn


def test_one_run_prints_its_line_and_writes_only_into_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_folder(tmp_path / "one", emulated_rounds(), {0: 0.1, 3: 0.5})
    assert main([str(run), "formats=png"]) == 0
    assert "| random | 1/1 |" in capsys.readouterr().out
    assert {p.name for p in run.iterdir()} >= {"figures", "rounds_summary.csv"}
    assert not (run / "analysis").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["target_fracton=0.9"], "unknown key 'target_fracton' (did you mean 'target_fraction'?)"),
        (["target=90"], "target=90: expected an accuracy in (0, 1]"),
        (["figures=maybe"], "figures='maybe': expected true or false"),
        ([], ""),
    ],
)
def test_mistakes_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    run = make_folder(tmp_path / "one", emulated_rounds(), {0: 0.1, 3: 0.5})
    assert main([str(run), *args, "formats=png"]) == (2 if message else 0)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_paths_that_hold_no_run(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match="no such folder"):
        from fedbench.analyze.cli import run

        run([str(tmp_path / "missing*")])
    proc = subprocess.run(
        [sys.executable, "-m", "fedbench.analyze", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("fedbench.analyze: error: no run folder")


def test_two_runs_are_compared_next_to_them_and_the_path_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`analyze A B` wrote ./analysis into the current directory; one run printed no path."""
    runs = tmp_path / "outputs" / "2026-01-01"
    for name, final in (("a", 0.6), ("b", 0.7)):
        make_folder(runs / name, emulated_rounds(), {0: 0.1, 3: final}, deadline_s=6.0)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main([str(runs / "a"), str(runs / "b"), "figures=false"]) == 0
    assert (runs / "analysis" / "results.md").is_file() and not (elsewhere / "analysis").exists()
    assert f"-> {runs / 'analysis'}" in capsys.readouterr().out
    assert main([str(runs / "a"), "figures=false"]) == 0
    assert f"figures -> {runs / 'a' / 'figures'}" in capsys.readouterr().out


def test_a_default_target_below_day_0_is_raised_above_it_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pretrained at 90%, best final 92%: 0.95 x 92% = 87.4% is reached at round 0 by all."""
    for strategy, final in (("random", 0.91), ("oort", 0.92)):
        make_folder(
            tmp_path / strategy,
            emulated_rounds(),
            {0: 0.9, 1: 0.905, 2: 0.91, 3: final},
            strategy=strategy,
            deadline_s=6.0,
        )
    out = tmp_path / "analysis"
    table = compare(find_run_dirs([tmp_path]), out, formats=("png",))
    # day 0 + 0.95 x (0.92 - 0.90) = 91.9%: only oort gets there, in round 3
    assert "Target accuracy 91.9%" in table
    assert "day-0 accuracy 0.9000" in capsys.readouterr().err
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    assert lines["oort"].startswith("| oort | 1/1 | 3.0")
    assert lines["random"].startswith("| random | 0/1 | - |")
