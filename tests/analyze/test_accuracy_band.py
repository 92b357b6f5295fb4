"""An accuracy band (mean +- sd over seeds) never leaves [0, 100] %: issue 47's study_daily
figure drew an sd band above 100%, which no seed can reach."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PolyCollection

from fedbench.analyze.figures_compare import Curve, accuracy_band, draw_accuracy_curves


def test_the_band_stops_at_0_and_100_whatever_the_spread() -> None:
    rng = np.random.default_rng(0)
    mean = rng.uniform(0, 100, 1000)
    sd = rng.uniform(0, 80, 1000)
    low, high = accuracy_band(mean, sd)
    assert low.min() >= 0.0 and high.max() <= 100.0
    inside = (mean - sd >= 0) & (mean + sd <= 100)
    assert np.array_equal(low[inside], (mean - sd)[inside])  # only what leaves is cut
    assert np.array_equal(high[inside], (mean + sd)[inside])


def test_a_drawn_band_near_100_stays_inside_the_axis() -> None:
    curves = [
        Curve("a", 3, np.arange(4.0), np.array([20.0, 90.0, 98.0, 99.5]), np.full(4, 6.0)),
        Curve("b", 3, np.arange(4.0), np.array([1.0, 50.0, 97.0, 99.0]), np.full(4, 9.0)),
    ]
    fig = draw_accuracy_curves(curves, "study_daily", "step", True, 0.9)
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2
    ys = np.concatenate([path.vertices[:, 1] for band in bands for path in band.get_paths()])
    assert ys.min() >= 0.0 and ys.max() <= 100.0, (ys.min(), ys.max())
    assert ys.max() == 100.0  # the band reaches the top: cut there, not dropped
