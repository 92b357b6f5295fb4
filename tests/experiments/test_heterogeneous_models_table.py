"""experiments/heterogeneous_models/table.py on run folders laid out as run.sh lays them out.

Two arms, two completed seeds each, and a third seed still running; the
figures below are worked out by hand from tests/analyze/folders.py's
emulated rounds (round 1: 10 + 4 J, round 2: 30 + 6 J and a timeout,
round 3: 10 J and a dropped device).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from experiments.heterogeneous_models.table import main
from tests.analyze.folders import emulated_rounds, make_folder

REACHES = {0: 0.1, 1: 0.5, 2: 0.8, 3: 0.9}  # reaches 0.75 at round 2
MISSES = {0: 0.1, 1: 0.5, 2: 0.6, 3: 0.7}  # never reaches 0.75
HETEROFL = {"algorithm": {"_target_": "fedbench.algorithms.heterofl.HeteroFL"}}
FEDAVG = {"algorithm": {"_target_": "flwr.serverapp.strategy.FedAvg"}}


def _study(root: Path) -> Path:
    folder = root / "rounds_tiny"
    for seed, accuracies in ((0, REACHES), (1, MISSES)):
        make_folder(
            folder / "fedavg_deadline" / str(seed),
            emulated_rounds(),
            accuracies,
            seed=seed,
            server=FEDAVG,
        )
    for seed, half in ((0, 0.96), (1, 0.92)):
        make_folder(
            folder / "heterofl_deadline" / str(seed),
            emulated_rounds(),
            REACHES,
            seed=seed,
            server=HETEROFL,
            per_rate={"3": {"1": 0.9, "0.5": half}},
        )
    make_folder(
        folder / "heterofl_deadline" / "2",
        emulated_rounds(),
        MISSES,
        seed=2,
        status="running",
        server=HETEROFL,
    )
    return folder


def _row(out: str, arm: str) -> list[str]:
    (line,) = [line for line in out.splitlines() if line.startswith(f"| `{arm}`")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_each_arm_is_its_seeds_mean_and_sd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(_study(tmp_path)), "target=0.75"]) == 0
    captured = capsys.readouterr()
    assert "target accuracy 75.0%" in captured.out
    # final 90 and 70; one seed reached the target at round 2 with 14 + 36 J.
    assert _row(captured.out, "fedavg_deadline") == [
        "`fedavg_deadline`", "2", "80.0 ± 14.1", "", "1/2", "2", _time(), "50", "60 ± 0", "1 ± 0",
    ]  # fmt: skip
    heterofl = _row(captured.out, "heterofl_deadline")
    # The running seed 2 is left out (it would make 3 seeds and miss the target).
    assert heterofl[1:5] == ["2", "90.0 ± 0.0", "1/2: 94.0", "2/2"]
    assert "left out" in captured.err and "heterofl_deadline/2 (running)" in captured.err


def _time() -> str:
    """The virtual clock at round 2's end: each round lasts until its last reply."""
    trips = emulated_rounds()
    return f"{sum(max(d.start_s + d.trip_s for d in trips[r]) for r in (1, 2)):.1f}"


def test_the_default_target_is_the_best_arms_mean_final_accuracy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(_study(tmp_path))]) == 0
    # 0.95 x 90% (heterofl_deadline's mean) = 85.5%: only the 90% seeds reach it, at round 3.
    out = capsys.readouterr().out
    assert "target accuracy 85.5%" in out
    assert _row(out, "heterofl_deadline")[4:6] == ["2/2", "3 ± 0"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["{missing}"], "no completed run folder"),
        (["{study}", "{study}"], "one FOLDER"),
        (["{study}", "fraction=0.9"], "unknown key fraction"),
        (["{study}", "target=92"], "target=92: an accuracy in (0, 1]"),
        (["{study}", "target=high"], "target=high: an accuracy in (0, 1]"),
        (["{study}", "seeds=0-2"], "seeds=0-2: integers separated by commas"),
    ],
)
def test_a_wrong_call_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    study = _study(tmp_path)
    argv = [a.format(missing=tmp_path / "none", study=study) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_the_figure_is_drawn_also_where_no_seed_reached_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figure = tmp_path / "figures" / "to_target.png"  # a folder not made yet
    # 0.95: no run reaches it, so the time and energy panels have no bar at all.
    assert main([str(_study(tmp_path)), "target=0.95", f"figure={figure}"]) == 0
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert f"-> {figure}" in capsys.readouterr().out


def test_the_best_rate_is_among_the_rates_devices_trained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Everyone at 1/16: the 1/8 submodel (untrained channels added) does not count,
    however it scores."""
    at_1_16 = {
        r: [replace(d, model_rate=0.0625) for d in devices]
        for r, devices in emulated_rounds().items()
    }
    folder = tmp_path / "rounds_tiny"
    make_folder(
        folder / "fedavg_smallest" / "0",
        at_1_16,
        REACHES,
        server=HETEROFL,
        per_rate={"3": {"1": 0.2, "0.125": 0.91, "0.0625": 0.9}},
    )
    assert main([str(folder), "target=0.75"]) == 0
    assert _row(capsys.readouterr().out, "fedavg_smallest")[3] == "1/16: 90.0"


def test_a_daily_study_counts_days_to_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "daily_tiny"
    make_folder(folder / "heterofl_deadline" / "0", emulated_rounds(), REACHES, scenario="daily")
    assert main([str(folder), "target=0.75"]) == 0
    out = capsys.readouterr().out
    assert "| days to target |" in out and "rounds to target" not in out
    assert _row(out, "heterofl_deadline")[4:6] == ["1/1", "2"]


def test_seeds_keeps_every_arm_on_the_same_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(_study(tmp_path)), "target=0.75", "seeds=1"]) == 0
    out = capsys.readouterr().out
    # seed 1 alone: FedAvg's missing seed, HeteroFL's second
    assert _row(out, "fedavg_deadline")[1:3] == ["1", "70.0"]
    assert _row(out, "heterofl_deadline")[1:4] == ["1", "90.0", "1/2: 92.0"]
