"""The analysis of a run is bounded in the fleet's size: a 100,000-device run's figures have
as many artists and tick labels as a small one's, and loading a 1,000,000-device run keeps
nothing per device of the fleet. Counted, not timed: these fail at once when scale regresses."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from fedbench.analyze import RUN_FIGURES, analyze_run, load_run
from fedbench.analyze.figures_compare import selection_heatmaps
from fedbench.analyze.runs import Run, participation_fairness
from tests.analyze.large import make_large_folder

# What one figure may hold, whatever the fleet: artists (bars, lines, texts, ...)
# and tick labels over all its axes.
MAX_ARTISTS = 1500
MAX_TICKS = 220


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("large") / "run"
    return load_run(make_large_folder(folder, 100_000, rounds=12, per_round=400))


def counts(fig: Figure) -> tuple[int, int]:
    """(artists, tick labels) of a figure, without drawing it."""
    ticks = sum(
        len(ax.xaxis.get_majorticklocs()) + len(ax.yaxis.get_majorticklocs()) for ax in fig.axes
    )
    return len(fig.findobj()), ticks


@pytest.mark.parametrize("name", list(RUN_FIGURES))
def test_a_100k_device_runs_figures_stay_bounded(large: Run, name: str) -> None:
    figure = RUN_FIGURES[name](large)
    assert isinstance(figure, Figure), figure
    artists, ticks = counts(figure)
    assert artists <= MAX_ARTISTS, f"{name}: {artists} artists"
    assert ticks <= MAX_TICKS, f"{name}: {ticks} tick labels"


def test_per_device_figures_say_how_they_show_a_large_fleet(large: Run) -> None:
    for name in ("fairness", "energy_per_device", "memory"):
        figure = RUN_FIGURES[name](large)
        assert isinstance(figure, Figure)
        titles = " ".join(ax.get_title() for ax in figure.axes).replace("\n", " ")
        assert "per profile" in titles and "no bar per device" in titles, (name, titles)


def test_the_selection_map_of_a_large_fleet_is_binned(large: Run) -> None:
    figure = selection_heatmaps([large], {large.path: "random"})
    assert isinstance(figure, Figure)
    artists, ticks = counts(figure)
    assert artists <= MAX_ARTISTS and ticks <= MAX_TICKS
    (image,) = figure.axes[0].get_images()
    assert image.get_array().shape[0] <= 100  # rows are bins of the fleet, not devices
    assert "binned" in figure.get_suptitle()


def test_analyze_run_writes_every_figure_of_a_100k_device_run(tmp_path: Path) -> None:
    folder = make_large_folder(tmp_path / "run", 100_000, rounds=3, per_round=200)
    written = analyze_run(folder, formats=("png",))
    assert {p.stem for p in written if p.suffix == ".png"} == set(RUN_FIGURES)


def test_loading_a_million_device_run_keeps_nothing_per_fleet_device(tmp_path: Path) -> None:
    folder = make_large_folder(tmp_path / "run", 1_000_000, rounds=2, per_round=100)
    tracemalloc.start()
    try:
        run = load_run(folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.fleet.size == 1_000_000
    assert len(run.fleet.position) == len(run.selections) <= 200
    # A name per device of the fleet alone would be ~60 MB.
    assert peak < 20e6, f"load_run traced {peak / 1e6:.0f} MB"
    # Jain's index over the whole fleet: 200 devices once each, 999,800 never.
    assert participation_fairness(run) == pytest.approx(len(run.selections) / 1_000_000)


def test_a_run_imports_matplotlib_only_to_draw() -> None:
    """What a run's driver imports before its rounds (the entry point, Hydra's sweep callback,
    the server and client apps) leaves matplotlib out: 33 MB of the driver's peak at 100,000
    devices otherwise (benchmarks/scale.py). The figures import it when the run is over."""
    probe = (
        "import sys\n"
        "import fedbench.__main__, fedbench.analyze.sweep\n"
        "import fedbench.server.app, fedbench.client.app\n"
        "import fedbench.analyze\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported at start'\n"
        "fedbench.analyze.analyze_finished\n"
        "assert 'matplotlib' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
