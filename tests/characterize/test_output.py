"""The studies' shared plotting helpers (fedbench.characterize.output)."""

from __future__ import annotations

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
