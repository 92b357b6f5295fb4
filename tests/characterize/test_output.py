"""The studies' shared plotting helpers (fedbench.characterize.output)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from fedbench.characterize.output import log_y, pyplot


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (2.9, 8.5, {"3", "4", "6"}),  # under a decade: minor ticks labelled, as numbers
        (0.03, 300.0, {"0.1", "1", "10", "100"}),  # decades: 0.1, not 1e-01 or 10^-1
    ],
)
def test_a_log_y_axis_is_labelled_with_plain_numbers(
    low: float, high: float, expected: set[str]
) -> None:
    plt = pyplot()
    fig, ax = plt.subplots()
    ax.bar([0, 1], [low, high])
    log_y(ax)
    ax.set_ylim(low, high)
    fig.canvas.draw()
    labels = {
        t.get_text() for t in ax.get_yticklabels(minor=False) + ax.get_yticklabels(minor=True)
    }
    plt.close(fig)
    assert expected <= labels
    assert not any("$" in t or "e-" in t or "times" in t for t in labels), labels


def _config_rows(latencies: dict[str, float]) -> list[dict[str, object]]:
    return [
        {
            "device": "this",
            "model": "mobilenetv2",
            "batch_size": 4,
            "group": "all",
            "cores": cores,
            "level": "H",
            "step_latency_s": s,
            "energy_active_j": math.nan,
        }
        for cores, s in latencies.items()
    ]


@pytest.mark.parametrize(
    ("latencies", "scale"),
    [
        ({"1": 0.56, "2": 0.39}, "linear"),  # 1.4x apart: bars from zero
        ({"1": 0.04, "2": 1.2}, "log"),  # 30x apart (little 1x L vs big 4x H)
    ],
)
def test_cpu_config_bars_are_on_a_log_axis_only_across_a_decade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, latencies: dict[str, float], scale: str
) -> None:
    from fedbench.characterize.studies import cpu_config

    plt = pyplot()
    drawn: list[Any] = []
    real = plt.subplots

    def subplots(*args: Any, **kwargs: Any) -> Any:
        fig, axes = real(*args, **kwargs)
        drawn.append(axes)
        return fig, axes

    monkeypatch.setattr(plt, "subplots", subplots)
    cpu_config.plot(_config_rows(latencies), tmp_path / "cpu_config.png")
    latency, energy = drawn[0]
    assert latency.get_yscale() == scale
    if scale == "linear":
        assert latency.get_ylim()[0] == 0.0
    assert list(energy.get_yticks()) == []  # nothing measured: no axis to read
