"""Runs side by side: accuracy against time, energy and rounds, time and energy to target,
and who was picked when - one line (mean over seeds, band +- 1 sd) per strategy label.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from fedbench.analyze.figures_fleet import MAX_DEVICE_ROWS, short
from fedbench.analyze.runs import NOT_PICKED, Run
from fedbench.analyze.style import (
    STATUS_COLOURS,
    energy_unit,
    integer_axis,
    legend_outside,
    strategy_styles,
    time_unit,
)
from fedbench.analyze.tables import StrategyRow
from fedbench.core.records import STATUSES

# A binned selection map has at most this many round columns, and names at most
# this many profiles on its device axis.
MAX_ROUND_COLUMNS = 200
MAX_PROFILE_TICKS = 24


def by_label(runs: list[Run], named: dict[Path, str]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.seed):
        groups[named[run.path]].append(run)
    return dict(sorted(groups.items()))


def _x(run: Run, axis: str) -> list[float]:
    if axis == "energy_j":
        return [e.energy_j for e in run.evaluations]
    if axis == "step":
        return [float(e.day if run.by_day else e.round) for e in run.evaluations]
    if run.by_day:  # summed round time: the nights are the same for every strategy
        return [e.time_s for e in run.evaluations]
    return [e.clock_s if math.isfinite(e.clock_s) else e.time_s for e in run.evaluations]


@dataclass(frozen=True)
class Curve:
    """One label's accuracy line: x per evaluation (mean over runs), accuracy in % per evaluation
    (mean and sample sd over runs; sd NaN for one run) and how many runs it averages."""

    label: str
    runs: int
    x: np.ndarray
    mean: np.ndarray
    sd: np.ndarray


def accuracy_band(mean: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mean +- sd of an accuracy in %, stopped at 0 and 100: no seed can leave that range,
    and a band past it reads as a seed above 100% (issue 47's study_daily figure)."""
    return np.clip(mean - sd, 0.0, 100.0), np.clip(mean + sd, 0.0, 100.0)


def accuracy_curves(
    runs: list[Run], named: dict[Path, str], axis: str, target: float | None
) -> Figure | str:
    """Mean over seeds per label, evaluation by evaluation; the band is +- 1 sd of accuracy.

    `axis`: time_s (virtual clock; daily: time in rounds), energy_j or step
    (day or round). Seeds are aligned by evaluation, up to the shortest run.
    """
    groups = by_label(runs, named)
    curves = []
    for label, members in groups.items():
        usable = [r for r in members if r.evaluations and all(map(math.isfinite, _x(r, axis)))]
        n = min((len(r.evaluations) for r in usable), default=0)
        if n == 0:
            continue
        xs = np.array([_x(r, axis)[:n] for r in usable]).mean(axis=0)
        ys = 100.0 * np.array([[e.accuracy for e in r.evaluations[:n]] for r in usable])
        sd = ys.std(axis=0, ddof=1) if len(usable) > 1 else np.full(n, math.nan)
        curves.append(Curve(label, len(usable), xs, ys.mean(axis=0), sd))
    if not curves:
        return "no run has evaluations" + (" with energy figures" if axis == "energy_j" else "")
    first = runs[0]
    return draw_accuracy_curves(curves, first.experiment, axis, first.by_day, target, groups)


def draw_accuracy_curves(
    curves: list[Curve],
    experiment: str,
    axis: str,
    by_day: bool,
    target: float | None,
    labels: Iterable[str] = (),
) -> Figure:
    """The accuracy figure of `accuracy_curves`, from lines already averaged over seeds
    (experiments/reproduce.py draws it from a study's committed accuracy_per_day.csv).

    `labels`: every label of the comparison (a label without a line keeps the others'
    colours as in the comparison's other figures); default the curves'.
    """
    styles = strategy_styles([*labels, *(c.label for c in curves)])
    peak = max(float(c.x.max()) for c in curves)
    scale, unit = (
        time_unit(peak)
        if axis == "time_s"
        else energy_unit(peak)
        if axis == "energy_j"
        else (1, "")
    )
    step = "day" if by_day else "round"
    fig = Figure(figsize=(9.5, 4.4))
    ax = fig.subplots()
    for curve in curves:
        style = styles[curve.label]
        ax.plot(
            curve.x / scale,
            curve.mean,
            color=style["color"],
            linestyle=style["linestyle"],
            marker=style["marker"],
            markersize=3,
            label=textwrap.fill(f"{curve.label} (n={curve.runs})", 36),
        )
        if curve.runs > 1:
            low, high = accuracy_band(curve.mean, curve.sd)
            ax.fill_between(curve.x / scale, low, high, color=style["color"], alpha=0.12)
    if target is not None and math.isfinite(target):
        ax.axhline(100.0 * target, color="black", linestyle=":", linewidth=1, label="target")
    what = {
        "time_s": (
            f"virtual time in rounds, nights excluded ({unit})"
            if by_day
            else f"virtual clock ({unit})"
        ),
        "energy_j": f"cumulative energy of all devices ({unit})",
        "step": step,
    }[axis]
    ax.set_xlabel(what)
    if axis == "step":
        integer_axis(ax)
    ax.set_ylabel("test accuracy (%), mean ± sd over seeds")
    short = {"time_s": "virtual time", "energy_j": "energy", "step": step}[axis]
    ax.set_title(f"{experiment}: accuracy vs {short}", fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax)  # eight strategies leave no empty corner
    return fig


def to_target(rows: list[StrategyRow]) -> Figure | str:
    """Time and energy to the target per label, mean +- sd over the seeds that reached it."""
    reached = [r for r in rows if r.reached]
    if not reached:
        return "no run reached the target accuracy"
    styles = strategy_styles(r.strategy for r in rows)
    labels = [textwrap.fill(r.strategy, 30) for r in rows]
    # Each bar gets the height of the longest label: a sweep's labels name every key
    # that differs between arms and wrap to four lines, which overlapped at 0.35".
    lines = max(label.count("\n") + 1 for label in labels)
    fig = Figure(figsize=(10, max(0.35, 0.15 * lines + 0.1) * len(rows) + 1.8))
    left, right = fig.subplots(1, 2, sharey=True)
    ys = np.arange(len(rows))
    for ax, key, what in (
        (left, "time_to_target_s", "virtual time to target"),
        (right, "energy_to_target_j", "energy to target"),
    ):
        means = [getattr(r, key)[0] for r in rows]
        sds = [getattr(r, key)[1] for r in rows]
        finite = [m for m in means if math.isfinite(m)]
        scale, unit = (time_unit if key.startswith("time") else energy_unit)(max(finite, default=0))
        heights = [m / scale if math.isfinite(m) else 0 for m in means]
        ax.barh(ys, heights, color=[styles[r.strategy]["color"] for r in rows])
        # A spread only where two or more seeds reached the target: one seed's sd is
        # undefined, and a cap of width zero read as "no spread".
        spread = [i for i, (r, s) in enumerate(zip(rows, sds, strict=True)) if _has_sd(r, s)]
        if spread:
            ax.errorbar(
                [heights[i] for i in spread],
                ys[spread],
                xerr=[sds[i] / scale for i in spread],
                fmt="none",
                ecolor="black",
                capsize=3,
            )
        for y, row, m in zip(ys, rows, means, strict=True):
            text = f"{row.reached}/{row.runs}" if math.isfinite(m) else "not reached"
            if math.isfinite(m) and row.reached == 1:
                text += " (one seed: no sd)"
            ax.text(
                0,
                y,
                f" {text}",
                va="center",
                fontsize=7,
                color="white" if math.isfinite(m) else "black",
            )
        ax.set_xlabel(f"{what} ({unit})")
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
    left.set_yticks(ys)
    left.set_yticklabels(labels, fontsize=8)
    left.invert_yaxis()
    fig.suptitle(
        f"{rows[0].experiment}: to {100 * rows[0].target:.1f}% accuracy "
        "(mean ± sd over the seeds that reached it; n reached/runs)",
        fontsize=10,
    )
    return fig


def _has_sd(row: StrategyRow, sd: float) -> bool:
    return row.reached >= 2 and math.isfinite(sd)


def selection_heatmaps(runs: list[Run], named: dict[Path, str]) -> Figure | str:
    """Per label (its lowest seed): devices x rounds, coloured by the report's status.

    A fleet of more than MAX_DEVICE_ROWS devices is binned instead (`_binned`).
    """
    groups = by_label(runs, named)
    shown = {k: v for k, v in groups.items() if v[0].rounds and v[0].fleet.size}
    if not shown:
        return "no round ran"
    first = next(iter(shown.values()))[0]
    if max(v[0].fleet.size for v in shown.values()) > MAX_DEVICE_ROWS:
        return _binned(shown)
    cols = min(len(shown), 4)
    rows = (len(shown) + cols - 1) // cols
    height = 0.16 * first.fleet.size + 1.2
    fig = Figure(figsize=(4.2 * cols, height * rows + 0.6))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).reshape(-1)
    cmap = ListedColormap(list(STATUS_COLOURS.values()))
    for ax, (label, members) in zip(axes, shown.items(), strict=False):
        run = members[0]
        heat = run.picks.heat(run.fleet.size, run.rounds)
        ax.imshow(
            heat,
            aspect="auto",
            cmap=cmap,
            vmin=-0.5,
            vmax=len(STATUSES) + 0.5,
            interpolation="nearest",
            extent=(0.5, heat.shape[1] + 0.5, run.fleet.size - 0.5, -0.5),
        )
        ax.set_title(textwrap.fill(f"{label}, seed {run.seed}", 42), fontsize=8)
        ax.set_yticks(range(run.fleet.size))
        ax.set_yticklabels(run.fleet.names(), fontsize=5)
        ax.set_xlabel("round", fontsize=8)
        integer_axis(ax)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes)[len(shown) :]:
        ax.axis("off")
    handles = [Patch(color=c, label=s) for s, c in STATUS_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"{first.experiment}: devices picked per round")
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig


def _binned(shown: dict[str, list[Run]]) -> Figure:
    """Fleet-order bins x rounds (binned too past MAX_ROUND_COLUMNS): the share of each bin's
    device-rounds that were picked, profiles marked; a 2-D histogram of the records."""
    cols = min(len(shown), 4)
    rows = (len(shown) + cols - 1) // cols
    first = next(iter(shown.values()))[0]
    # Constrained: each panel's profile names and the shared colour bar get their room.
    fig = Figure(figsize=(4.6 * cols + 1.0, 4.6 * rows + 0.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).reshape(-1)
    shares = {label: _shares(members[0]) for label, members in shown.items()}
    top = max(float(share.max(initial=0.0)) for share, _, _ in shares.values()) or 1.0
    image = None
    for ax, (label, members) in zip(axes, shown.items(), strict=False):
        run = members[0]
        share, device_edges, round_edges = shares[label]
        image = ax.imshow(
            share,
            aspect="auto",
            cmap="Blues",
            vmin=0.0,
            vmax=top,
            interpolation="nearest",
            extent=(round_edges[0], round_edges[-1], device_edges[-1], device_edges[0]),
        )
        starts = [start for _, start, _ in run.fleet.groups]
        for start in starts[1:]:
            ax.axhline(start, color="#d55e00", linewidth=0.6)
        ticks = [(start + count / 2, short(p)) for p, start, count in run.fleet.groups]
        if len(ticks) > MAX_PROFILE_TICKS:  # many small groups: every k-th is named
            ticks = ticks[:: math.ceil(len(ticks) / MAX_PROFILE_TICKS)]
        ax.set_yticks([t for t, _ in ticks])
        ax.set_yticklabels([name for _, name in ticks], fontsize=6)
        per_bin = math.ceil(run.fleet.size / (len(device_edges) - 1))
        ax.set_title(
            textwrap.fill(
                f"{label}, seed {run.seed} ({run.fleet.size:,} devices, ~{per_bin:,} a row)", 46
            ),
            fontsize=8,
        )
        ax.set_xlabel("round", fontsize=8)
        integer_axis(ax)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes)[len(shown) :]:
        ax.axis("off")
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), fraction=0.03, pad=0.02)
        bar.set_label("share of the row's device-rounds picked", fontsize=8)
    fig.suptitle(
        textwrap.fill(
            f"{first.experiment}: devices picked per round - the fleet in order, binned "
            f"(more than {MAX_DEVICE_ROWS} devices: no row per device); orange lines divide "
            "the profiles",
            110,
        ),
        fontsize=10,
    )
    return fig


def _shares(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(share picked per device bin and round bin, device bin edges, round bin edges)."""
    picks = run.picks
    keep = (picks.position >= 0) & (picks.round >= 1) & (picks.status != NOT_PICKED)
    device_edges = np.linspace(0, run.fleet.size, min(MAX_DEVICE_ROWS, run.fleet.size) + 1)
    round_edges = np.linspace(0.5, run.rounds + 0.5, min(MAX_ROUND_COLUMNS, run.rounds) + 1)
    counts, _, _ = np.histogram2d(
        picks.position[keep] + 0.5, picks.round[keep], bins=(device_edges, round_edges)
    )
    cells = np.outer(np.diff(device_edges), np.diff(round_edges))
    return counts / np.maximum(cells, 1e-12), device_edges, round_edges
