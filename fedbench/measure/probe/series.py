"""Pure functions over sampled series: interpolation, integrals, interval means.

A series is a time array and a value array of the same length; NaN marks a
sample without a reading and is skipped. Point quantities (power,
temperature, counters) are treated as piecewise linear between samples and
held constant before the first and after the last valid sample. Interval
quantities (utilisation from tick deltas, which describes the time since
the previous sample) are piecewise constant over (t[i-1], t[i]].
"""

from __future__ import annotations

import math

import numpy as np


def valid(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(y)
    return t[keep], y[keep]


def value_at(t: np.ndarray, y: np.ndarray, when: float) -> float:
    """Linearly interpolated value at `when`; NaN without valid samples."""
    tv, yv = valid(t, y)
    if tv.size == 0:
        return math.nan
    return float(np.interp(when, tv, yv))


def integrate(t: np.ndarray, y: np.ndarray, t0: float, t1: float) -> float:
    """Integral over [t0, t1] of the piecewise-linear interpolant (trapezoid rule).

    Exact for the interpolant, so an interval shorter than one sample
    period gets the interpolated value times its length.
    """
    tv, yv = valid(t, y)
    if tv.size == 0 or t1 < t0:
        return math.nan
    inner = tv[(tv > t0) & (tv < t1)]
    grid = np.concatenate(([t0], inner, [t1]))
    values = np.interp(grid, tv, yv)
    return float(np.sum((values[1:] + values[:-1]) * 0.5 * np.diff(grid)))


def interval_mean(t: np.ndarray, y: np.ndarray, t0: float, t1: float) -> float:
    """Time-weighted mean over [t0, t1] of a series where y[i] holds on (t[i-1], t[i]]."""
    if t.size < 2 or t1 <= t0:
        return math.nan
    lo = np.maximum(t[:-1], t0)
    hi = np.minimum(t[1:], t1)
    weight = np.clip(hi - lo, 0.0, None)
    values = y[1:]
    keep = np.isfinite(values) & (weight > 0)
    total = float(np.sum(weight[keep]))
    if total == 0.0:
        return math.nan
    return float(np.sum(weight[keep] * values[keep]) / total)


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping intervals merged into disjoint ones, sorted."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
