"""The to-target figure keeps a sweep's long arm labels apart.

A sweep over algorithm keys labels each arm with every key that differs
(`random [fjord, algorithm.rate=1.0, algorithm.rate_policy=budget, deadline]`),
four lines once wrapped; at a fixed 0.35 inch per bar they ran into each other
(the submodel study's figure, nine arms).
"""

from __future__ import annotations

import math

from matplotlib.backends.backend_agg import FigureCanvasAgg

from fedbench.analyze.figures_compare import to_target
from fedbench.analyze.tables import StrategyRow


def _row(strategy: str, time_s: float) -> StrategyRow:
    nan = (math.nan, math.nan)
    return StrategyRow(
        experiment="study",
        scenario="rounds",
        strategy=strategy,
        runs=1,
        reached=1,
        target=0.9,
        round_to_target=(3.0, math.nan),
        time_to_target_s=(time_s, math.nan),
        energy_to_target_j=(10 * time_s, math.nan),
        final_accuracy=(0.95, math.nan),
        total_time_s=nan,
        total_energy_j=nan,
        jain=nan,
        failures={},
    )


def test_wrapped_arm_labels_do_not_overlap() -> None:
    rows = [
        _row(f"random [{algo}, algorithm.rate=1.0, algorithm.rate_policy={policy}, deadline]", t)
        for t, (algo, policy) in enumerate(
            [(a, p) for a in ("heterofl", "fjord", "fedrolex") for p in ("budget", "deadline")],
            start=1,
        )
    ]
    fig = to_target(rows)
    assert not isinstance(fig, str)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].get_yticklabels()]
    assert len(boxes) == len(rows)
    assert all(b.height > 30 for b in boxes)  # wrapped over several lines
    ordered = sorted(boxes, key=lambda b: b.y0)
    for low, high in zip(ordered[:-1], ordered[1:], strict=True):
        assert low.y1 <= high.y0, (low, high)


def test_a_spread_is_drawn_only_where_two_seeds_reached_the_target() -> None:
    import dataclasses

    one = dataclasses.replace(_row("random [fedbuff]", 17.0), runs=3, reached=1)
    two = dataclasses.replace(
        _row("random [synchronous]", 20.0),
        runs=3,
        reached=3,
        time_to_target_s=(20.0, 1.5),
        energy_to_target_j=(150.0, 6.0),
    )
    fig = to_target([one, two])
    assert not isinstance(fig, str)
    for ax in fig.axes:
        # One error bar per panel (the row with three seeds), none of zero width.
        (bars,) = ax.containers[1:]
        (segments,) = bars.lines[2]
        widths = [abs(s[1][0] - s[0][0]) for s in segments.get_segments()]
        assert len(widths) == 1 and widths[0] > 0
        texts = [t.get_text() for t in ax.texts]
        assert " 1/3 (one seed: no sd)" in texts and " 3/3" in texts
