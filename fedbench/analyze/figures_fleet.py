"""A fleet too large for a row per device, shown the way a reader can see it.

Past `MAX_DEVICE_ROWS` devices a bar per device is a wall of unreadable
labels (and, at 100,000 devices, a figure matplotlib cannot lay out), so
the per-device figures of a run switch to these: one row per profile, the
devices that stand out (the biggest spenders), and histograms over the
whole fleet, never-picked devices included. Each says so in its title.
Everything is computed from the run's records, O(device-rounds), and the
fleet's groups; nothing holds an entry per device of the fleet.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import PurePath

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from fedbench.analyze.runs import Run, jain_index
from fedbench.analyze.style import (
    STATUS_COLOURS,
    amount,
    draw_needed,
    energy_unit,
    legend_outside,
    needed_handle,
    status_bars,
)
from fedbench.report.records import STATUSES

# A figure with a row per device draws at most this many rows; beyond, per profile.
MAX_DEVICE_ROWS = 100
# The devices named one by one in a fleet-sized figure (the biggest spenders).
NAMED_DEVICES = 15
# Histogram bars over "rounds picked" at most (integer bins wider than 1 beyond).
MAX_BINS = 40
NEVER_COLOUR = "#bbbbbb"
BAR_COLOUR = "#0072b2"


def short(profile: str) -> str:
    """A profile as a label: a profile file by its stem."""
    return PurePath(profile).stem if profile.endswith((".yaml", ".yml")) else profile


def wrapped(run: Run, what: str, width: int = 100) -> str:
    """The figure's title (run, strategy, seed: what), on as many lines as it needs."""
    return textwrap.fill(f"{run.experiment} ({run.strategy}, seed {run.seed}): {what}", width)


def percent(part: int, whole: int) -> str:
    """A share that never rounds to 0% or 100% unless it is: 99.8% stays 99.8%."""
    share = 100.0 * part / whole if whole else 0.0
    if share in (0.0, 100.0) or 1.0 <= share <= 99.0:
        return f"{share:.0f}%"
    for digits in range(1, 8):  # as many decimals as it takes not to read 0 or 100
        text = f"{share:.{digits}f}"
        if float(text) not in (0.0, 100.0):
            return f"{text}%"
    return f"{share:g}%"


def _profile_of(run: Run) -> dict[str, str]:
    """Device -> its profile, for every device the records name."""
    return {row.get("device", ""): row.get("profile", "") or "?" for row in run.rows}


def _label_ends(ax: Axes, ends: np.ndarray, texts: Sequence[str], room: float) -> None:
    """A note at the end of each bar, and room for it on the right."""
    for y, text in enumerate(texts):
        ax.text(ends[y], y, f" {text}", va="center", fontsize=7)
    ax.set_xlim(right=max(float(ends.max(initial=0.0)), 1e-9) * room)


def fairness(run: Run) -> Figure:
    """Per profile: rounds picked per device, by status, and the share never picked; below,
    every device of the fleet in a histogram of how often it was picked (0 included)."""
    profiles = run.fleet.profiles()
    of = _profile_of(run)
    rounds: dict[str, dict[str, float]] = {p: defaultdict(float) for p in profiles}
    picked: dict[str, int] = defaultdict(int)
    for device in run.selections:
        picked[of.get(device, "?")] += 1
    for row in run.rows:
        profile = of.get(row.get("device", ""), "?")
        rounds.setdefault(profile, defaultdict(float))[row.get("status", "")] += 1
    names = list(rounds)
    size = {p: max(profiles.get(p, 0), picked[p], 1) for p in names}
    by_status = {s: [rounds[p][s] / size[p] for p in names] for s in STATUSES}
    never = run.fleet.size - len(run.selections)
    fig = Figure(figsize=(8.5, 0.3 * len(names) + 5.2))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [0.3 * len(names) + 0.8, 2.6]})
    labels = [f"{short(p)} ({size[p]:,})" for p in names]
    ends = status_bars(
        top, labels, by_status, "rounds picked per device of the profile (mean)", legend=False
    )
    left_out = {p: size[p] - picked[p] for p in names}
    notes = [f"{left_out[p]:,} never picked ({percent(left_out[p], size[p])})" for p in names]
    _label_ends(top, ends, notes, 1.3)
    legend_outside(top)
    counts = np.asarray(list(run.selections.values()), dtype=np.int64)
    _picked_histogram(bottom, counts, never, run.fleet.size)
    jain = jain_index(counts, run.fleet.size)
    top.set_title(
        wrapped(
            run,
            f"selection fairness: Jain's index {jain:.3g}, {never:,} of {run.fleet.size:,} "
            "devices never picked; per profile (its devices in brackets) and over the fleet "
            f"(more than {MAX_DEVICE_ROWS} devices: no bar per device)",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def _picked_histogram(ax: Axes, counts: np.ndarray, never: int, size: int) -> None:
    """Devices by how many rounds they were picked in; the never-picked bar in grey."""
    top = int(counts.max(initial=0))
    width = max(1, math.ceil((top + 1) / MAX_BINS))
    edges = np.arange(0, top + width + 1, width)
    devices, _ = np.histogram(counts, bins=edges)
    devices[0] += never
    colours = [NEVER_COLOUR] + [BAR_COLOUR] * (len(devices) - 1)
    # A bar over the whole numbers it counts: 0, or 3..5 in bins of 3.
    ax.bar(edges[:-1] + (width - 1) / 2, devices, width=0.85 * width, color=colours)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.7)
    mean = counts.sum() / size if size else 0.0
    ax.axvline(mean, color="black", linestyle="--", linewidth=1)
    ax.set_xlabel("rounds a device was picked in" + (f" (bins of {width})" if width > 1 else ""))
    ax.set_ylabel("devices (log)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    legend_outside(
        ax,
        [
            Patch(color=NEVER_COLOUR, label=f"never picked ({never:,})"),
            Patch(color=BAR_COLOUR, label="picked"),
            Line2D([], [], color="black", linestyle="--", label=f"fleet mean ({mean:.3g})"),
        ],
    )


def energy(run: Run, totals: Mapping[str, Mapping[str, float]], note: str) -> Figure:
    """Per profile, the energy its devices spent by how rounds ended; below, the
    `NAMED_DEVICES` devices that spent the most."""
    of = _profile_of(run)
    per_profile: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    devices_of: dict[str, int] = defaultdict(int)
    for device, spent in totals.items():
        devices_of[of.get(device, "?")] += 1
        for status, joules in spent.items():
            per_profile[of.get(device, "?")][status] += joules
    names = [p for p in run.fleet.profiles() if p in per_profile]
    names += [p for p in per_profile if p not in names]
    sums = {d: sum(v.values()) for d, v in totals.items()}
    heaviest = sorted(sums, key=lambda d: (-sums[d], run.fleet.position.get(d, 0)))
    heaviest = heaviest[:NAMED_DEVICES]
    peak = max(sum(per_profile[p].values()) for p in names)
    scale, unit = energy_unit(peak)
    fig = Figure(figsize=(8.5, 0.3 * (len(names) + len(heaviest)) + 3.2))
    top, bottom = fig.subplots(
        2, 1, gridspec_kw={"height_ratios": [len(names) + 1.5, len(heaviest) + 1.5]}
    )
    ends = status_bars(
        top,
        [f"{short(p)} ({devices_of[p]:,} picked)" for p in names],
        {s: [per_profile[p].get(s, 0.0) / scale for p in names] for s in STATUSES},
        f"energy over the run, all its picked devices ({unit})",
        legend=False,
    )
    notes = []
    for p in names:
        each = sum(per_profile[p].values()) / devices_of[p]
        each_scale, each_unit = energy_unit(each)
        notes.append(f"{amount(each / each_scale)} {each_unit} a device")
    _label_ends(top, ends, notes, 1.25)
    legend_outside(top)
    hs, hunit = energy_unit(max(sums[d] for d in heaviest))
    status_bars(
        bottom,
        heaviest,
        {s: [totals[d].get(s, 0.0) / hs for d in heaviest] for s in STATUSES},
        f"energy over the run ({hunit}) of the {len(heaviest)} devices that spent the most",
        legend=False,
    )
    wasted = sum(v for d in totals.values() for s, v in d.items() if s != "ok")
    total = sum(sums.values())
    top.set_title(
        wrapped(
            run,
            f"energy of the {len(totals):,} devices picked: {amount(total / scale)} {unit}, "
            f"{100 * wasted / total if total else 0:.0f}% in rounds not ok{note} - per profile, "
            f"and the biggest spenders (more than {MAX_DEVICE_ROWS} devices: no bar per device)",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def memory(
    run: Run,
    peak: Mapping[str, float],
    budget: Mapping[str, float],
    ooms: Mapping[str, int],
    needed: Mapping[str, float] | None = None,
) -> Figure:
    """Per profile: the highest peak of its devices (bar), their range (line), the lowest budget.

    `needed` (device -> what the full batch would need where it ran a reduced
    memory plan) adds, per profile, the largest such need as a hollow marker.
    """
    of = _profile_of(run)
    peaks: dict[str, list[float]] = defaultdict(list)
    budgets: dict[str, float] = {}
    needs: dict[str, float] = {}
    for device, mb in (needed or {}).items():
        p = of.get(device, "?")
        needs[p] = max(needs.get(p, 0.0), mb)
    oom: dict[str, int] = defaultdict(int)
    devices: dict[str, int] = defaultdict(int)
    recorded = set(peak) | set(budget)
    for device in recorded:
        p = of.get(device, "?")
        devices[p] += 1
        oom[p] += ooms.get(device, 0) > 0
        if device in peak:
            peaks[p].append(peak[device])
        if device in budget:
            budgets[p] = min(budgets.get(p, math.inf), budget[device])
    names = [p for p in run.fleet.profiles() if p in devices]
    names += [p for p in devices if p not in names]
    fig = Figure(figsize=(8.5, max(2.5, 0.32 * len(names) + 1.6)))
    ax = fig.subplots()
    ys = np.arange(len(names))
    high = [max(peaks[p], default=0.0) for p in names]
    low = [min(peaks[p], default=0.0) for p in names]
    colours = [STATUS_COLOURS["oom"] if oom[p] else STATUS_COLOURS["ok"] for p in names]
    ax.barh(ys, high, color=colours, height=0.6)
    ax.hlines(ys, low, high, color="black", linewidth=1.5)
    known = [(y, budgets[p]) for y, p in zip(ys, names, strict=True) if p in budgets]
    if known:
        ax.scatter(
            [b for _, b in known], [y for y, _ in known], marker="|", s=180, color="black", zorder=3
        )
    forced = [i for i, p in enumerate(names) if p in needs]
    if forced:
        draw_needed(
            ax,
            [high[i] for i in forced],
            [needs[names[i]] for i in forced],
            [float(i) for i in forced],
        )
    values = [v for v in [*high, *low, *budgets.values(), *needs.values()] if v > 0]
    if values and max(values) / min(values) > 50:
        ax.set_xscale("log")  # MB-sized models against GB-sized budgets
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [
            f"{short(p)} ({devices[p]:,} device{'s' if devices[p] != 1 else ''}"
            + (f", {oom[p]:,} had oom)" if oom[p] else ")")
            for p in names
        ],
        fontsize=8,
    )
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlabel("training memory (MB)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(
        wrapped(
            run,
            f"peak training memory vs budget of the {len(recorded):,} devices picked, per "
            f"profile (more than {MAX_DEVICE_ROWS} devices: no bar per device)",
            90,
        ),
        fontsize=10,
    )
    handles = [
        Patch(color=STATUS_COLOURS["ok"], label="highest peak"),
        *(
            [Patch(color=STATUS_COLOURS["oom"], label="highest peak (a device had oom)")]
            if any(oom.values())
            else []
        ),
        Line2D([], [], color="black", linewidth=1.5, label="lowest to highest peak"),
        Line2D(
            [], [], color="black", marker="|", linestyle="", markersize=12, label="budget (lowest)"
        ),
        *([needed_handle()] if needs else []),
    ]
    legend_outside(ax, handles)
    return fig
