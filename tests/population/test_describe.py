"""`python -m fedbench.fleet describe`: the drawn population, printed and plotted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedbench.fleet import main


def test_describe_prints_every_distribution_and_writes_the_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "pop.png"
    assert main(["describe", "fleet=phones_100", "+fleet.scale=200", f"plot={png}"]) == 0
    out = capsys.readouterr().out
    assert "fleet phones_100: 200 devices, seed 0, model small_cnn" in out
    for label in ("speed factor", "download (Mbit/s)", "hours available per day", "battery"):
        assert label in out
    # The round time row: distinct values across the 200 devices, not 6 clones.
    row = next(line for line in out.splitlines() if line.startswith("predicted round time"))
    assert int(row.split()[4].replace(",", "")) > 150
    assert png.stat().st_size > 20_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_describe_without_a_population_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "clones.png"
    assert main(["describe", "fleet=mixed8", f"plot={png}"]) == 0
    assert "no fleet.population: every device is its profile" in capsys.readouterr().out
    assert png.exists()


def test_a_bad_override_is_one_line_and_a_missing_verb_shows_the_usage() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbench.fleet",
            "describe",
            "fleet=phones_100",
            "fleet.population.speed.sigma=-2",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "fedbench.fleet: error: fleet.population.speed.sigma=-2.0: must be >= 0 and <= 2"
    ]
    assert main(["show"]) == 2
