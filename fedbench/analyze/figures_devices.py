"""A run seen device by device: who trained when, what it cost, how hot, how much memory.

Like figures_run: each function returns a figure or the reason it has
nothing to draw (a fleet of host devices reports no temperature).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from textwrap import fill

import numpy as np
from matplotlib.artist import Artist
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

import fedbench.analyze.figures_fleet as figures_fleet
from fedbench.analyze.figures_run import NO_ENERGY, title
from fedbench.analyze.rounds import round_clock
from fedbench.analyze.runs import Run, number
from fedbench.analyze.style import (
    DAY_S,
    STATUS_COLOURS,
    amount,
    draw_needed,
    energy_unit,
    legend_outside,
    needed_handle,
    profile_colours,
    status_bars,
    time_unit,
)
from fedbench.core.records import STATUSES

# The timeline draws at most this many bars (device-rounds); longer runs show
# evenly spaced rounds, first and last included, and larger rounds a sample of
# their devices evenly spaced by reply time; the title says so.
TIMELINE_BARS = 160
# A round with more devices than its share shows this many (fewer if its share is
# smaller, never fewer than MIN_BARS): enough for its shape, with labels one can read.
SAMPLE_BARS = 80
MIN_BARS = 20
CUT_COLOUR = "#d62828"
CROWDED = 400  # trainings in the thermal figure beyond which its marks are drawn translucent


def _shown_rounds(run: Run) -> list[int]:
    picked: defaultdict[int, int] = defaultdict(int)
    for row in run.rows:
        picked[int(row["round"])] += 1
    rounds = [r for r in range(1, run.rounds + 1) if picked[r]]
    per_round = max(1, int(np.mean([picked[r] for r in rounds]))) if rounds else 1
    keep = max(1, TIMELINE_BARS // per_round)
    if len(rounds) <= keep:
        return rounds
    index = np.unique(np.linspace(0, len(rounds) - 1, keep).round().astype(int))
    return [rounds[i] for i in index]


@dataclass(frozen=True)
class _Bar:
    """One device's part in one round, relative to the round's start."""

    device: str
    begin: float
    end: float  # the reply, or the round's close when none came
    status: str
    replied: bool


def _bars(run: Run, rounds: list[int]) -> tuple[list[_Bar], list[tuple[int, int, int, float]], int]:
    """The bars of `rounds`, per round (round, first bar, last bar, where it closed), and
    the most devices a round had of which only some are shown (0: all shown). A round
    with more than its share of TIMELINE_BARS shows a sample (SAMPLE_BARS)."""
    start, _ = round_clock(run)
    by_round: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in run.rows:
        by_round[int(row["round"])].append(row)
    bars: list[_Bar] = []
    bands: list[tuple[int, int, int, float]] = []
    thinned = 0
    position = run.fleet.position
    share = max(TIMELINE_BARS // max(len(rounds), 1), MIN_BARS)
    limit = min(share, SAMPLE_BARS)
    for r in rounds:
        cut = float(run.durations[r])
        first = len(bars)
        rows = sorted(by_round[r], key=lambda x: position.get(x.get("device", ""), -1))
        if len(rows) > share:
            thinned = max(thinned, len(rows))
            rows = _by_reply(rows, float(start[r]), cut, limit)
        for row in rows:
            begin, end = _span(row, float(start[r]))
            replied = not math.isnan(end)
            bars.append(
                _Bar(
                    row.get("device", "?"),
                    begin,
                    end if replied else max(cut, begin),
                    row.get("status", ""),
                    replied,
                )
            )
        bands.append((r, first, len(bars) - 1, cut))
    return bars, bands, thinned


def _by_reply(
    rows: list[dict[str, str]], round_start: float, cut: float, limit: int
) -> list[dict[str, str]]:
    """`limit` of a round's devices, evenly by rank of reply (the slowest included), in
    reply order: the shape of the round, its stragglers at the bottom."""
    ends = np.array([_span(row, round_start)[1] for row in rows])
    ends = np.where(np.isnan(ends), max(cut, float(np.nanmax(ends, initial=0.0))) + 1.0, ends)
    order = np.argsort(ends, kind="stable")
    ranks = np.unique(np.linspace(0, len(rows) - 1, limit).round().astype(int))
    return [rows[i] for i in order[ranks]]


def timeline(run: Run) -> Figure | str:
    """Per round, one bar per picked device from when it got the model to when it replied.

    Time is relative to the round's start; the red line is where the server
    closed the round (the slowest reply, the deadline or the first k). A
    device without a reply is hatched up to the close.
    """
    rounds = _shown_rounds(run)
    if not rounds:
        return "no device was picked in any round"
    bars, bands, thinned = _bars(run, rounds)
    longest = max([b.end for b in bars] + [band[3] for band in bands] + [1e-9])
    scale, unit = time_unit(longest)
    height = min(40.0, max(3.0, 0.17 * len(bars) + 0.25 * len(bands) + 1.2))
    fig = Figure(figsize=(9, height))
    ax = fig.subplots()
    for replied in (True, False):
        mine = [(y, b) for y, b in enumerate(bars) if b.replied == replied]
        if mine:
            ax.barh(
                [y for y, _ in mine],
                [(b.end - b.begin) / scale for _, b in mine],
                left=[b.begin / scale for _, b in mine],
                height=0.75,
                color=[STATUS_COLOURS.get(b.status, "#444444") for _, b in mine],
                hatch=None if replied else "///",
                edgecolor="white" if replied else "#333333",
                linewidth=0.3,
            )
    for _, first, last, cut in bands:
        ax.plot([cut / scale] * 2, [first - 0.45, last + 0.45], color=CUT_COLOUR, linewidth=1.6)
        if last < len(bars) - 1:
            ax.axhline(last + 0.5, color="#bbbbbb", linewidth=0.6)
    ax.set_yticks(range(len(bars)))
    ax.set_yticklabels([b.device for b in bars], fontsize=max(4, min(7, 700 // len(bars))))
    ax.set_ylim(len(bars) - 0.5, -0.5)
    right = ax.twinx()  # the round of each band, on the right
    right.set_ylim(ax.get_ylim())
    right.set_yticks([(first + last) / 2 for _, first, last, _ in bands])
    right.set_yticklabels([_round_label(run, r) for r, *_ in bands], fontsize=7)
    right.tick_params(length=0)
    ax.set_xlabel(f"virtual time since the round started ({unit})")
    ax.set_xlim(left=0)
    picked = _picked_rounds(run)
    shown = "" if len(rounds) == picked else f" ({len(rounds)} of {picked} rounds shown)"
    if thinned:
        shown += (
            f"; {min(max(TIMELINE_BARS // len(rounds), MIN_BARS), SAMPLE_BARS)} of up to "
            f"{thinned:,} devices a round, evenly by reply time (the slowest included)"
        )
    ax.set_title(fill(title(run, f"device timeline per round{shown}"), 100), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    statuses = {b.status for b in bars}
    handles: list[Artist] = [
        Patch(color=STATUS_COLOURS[s], label=s) for s in STATUSES if s in statuses
    ]
    if not all(b.replied for b in bars):
        handles.append(Patch(facecolor="white", edgecolor="#333333", hatch="///", label="no reply"))
    handles.append(Line2D([], [], color=CUT_COLOUR, linewidth=1.6, label="round closed"))
    legend_outside(right, handles, top=True, gap=0.12)  # right of the round labels
    return fig


def _picked_rounds(run: Run) -> int:
    return len({int(row["round"]) for row in run.rows})


def _round_label(run: Run, r: int) -> str:
    day = next((int(row["day"]) for row in run.rows if int(row["round"]) == r), None)
    return (
        f"day {day}"
        if run.by_day and day is not None and run.rounds == day_count(run)
        else f"round {r}"
    )


def day_count(run: Run) -> int:
    """Rounds if every day has one round (the usual daily scenario), else -1."""
    days = {int(row["day"]) for row in run.rows if row.get("day", "") != ""}
    rounds = {int(row["round"]) for row in run.rows}
    return len(rounds) if len(days) == len(rounds) else -1


def _span(row: dict[str, str], round_start: float) -> tuple[float, float]:
    """(start, end) of a device's part in its round, relative to the round's start."""
    start, end = number(row.get("start_s")), number(row.get("end_s"))
    if not math.isnan(start):  # the server's clock (newer runs)
        return start - round_start, end - round_start
    trip = number(row.get("round_trip_s"))  # older runs: every device starts with the round
    return 0.0, trip


def energy_per_device(run: Run) -> Figure | str:
    """Each device's total energy, split by how its rounds ended (ok vs wasted)."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    unknown: set[str] = set()
    for row in run.rows:
        joules = number(row.get("energy_j"))
        if math.isnan(joules):
            unknown.add(row.get("device", ""))
        else:
            totals[row.get("device", "")][row.get("status", "")] += joules
    if not totals:
        return NO_ENERGY
    note = (
        f"; {len(unknown - set(totals))} devices without energy figures"
        if unknown - set(totals)
        else ""
    )
    if len(totals) > figures_fleet.MAX_DEVICE_ROWS:
        return figures_fleet.energy(run, totals, note)
    devices = [d for d in run.fleet.recorded() if d in totals]
    peak = max(sum(v.values()) for v in totals.values())
    scale, unit = energy_unit(peak)
    fig = Figure(figsize=(7.5, max(2.5, 0.2 * len(devices) + 1.3)))
    ax = fig.subplots()
    by_status = {s: [totals[d].get(s, 0.0) / scale for d in devices] for s in STATUSES}
    status_bars(ax, devices, by_status, f"energy over the run ({unit}), by how each round ended")
    wasted = sum(v for d in totals.values() for s, v in d.items() if s != "ok")
    total = sum(sum(d.values()) for d in totals.values())
    ax.set_title(
        title(
            run,
            f"energy of the {len(devices)} devices picked: {amount(total / scale)} {unit}, "
            f"{100 * wasted / total if total else 0:.0f}% in rounds not ok{note}",
        ),
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    legend_outside(ax)
    return fig


@dataclass(frozen=True)
class _Stint:
    """One device's training in one round, on the virtual clock."""

    begin: float
    end: float
    temp_start: float
    temp_end: float
    freq_ghz: float
    throttled: bool


def _stints(run: Run) -> tuple[dict[str, list[_Stint]], dict[str, str]]:
    start, _ = round_clock(run)
    stints: dict[str, list[_Stint]] = defaultdict(list)
    profiles: dict[str, str] = {}
    for row in run.rows:
        t0, t1 = number(row.get("temp_c_start")), number(row.get("temp_c_end"))
        if math.isnan(t0) and math.isnan(t1):
            continue
        begin, reply = _span(row, 0.0)
        if math.isnan(number(row.get("start_s"))):  # older runs: relative to the round
            begin, reply = (
                begin + float(start[int(row["round"])]),
                reply + float(start[int(row["round"])]),
            )
        latency = number(row.get("latency_s"))
        end = begin + latency if not math.isnan(latency) else reply
        throttled = number(row.get("throttled_frac"))
        device = row.get("device", "?")
        profiles[device] = row.get("profile", device)
        stints[device].append(
            _Stint(
                begin,
                end if not math.isnan(end) else begin,
                t0,
                t1,
                number(row.get("freq_ghz_avg")),
                throttled > 0,
            )
        )
    return stints, profiles


def thermal(run: Run) -> Figure | str:
    """Temperature and average clock of each device over the virtual clock (throttling).

    Each round a device trained in is a segment from its temperature when
    training started to when it ended (a circle at the end; a black cross
    if it throttled). Segments are not joined: between its rounds a device
    cools while idle, and no one measured how.
    """
    stints, profiles = _stints(run)
    if not stints:
        return "no device reported its temperature"
    latest = max(s.end for points in stints.values() for s in points)
    # A daily run's clock starts day 1 at 0 s: on a day axis, day d spans [d, d + 1), so
    # the figure numbers days 1-17 as every other figure does (not the clock's 0-16).
    scale, unit = (DAY_S, "day") if run.by_day else time_unit(latest)
    offset = 1.0 if run.by_day else 0.0
    colours = profile_colours([profiles[d] for d in stints])
    by_profile: dict[str, list[_Stint]] = defaultdict(list)
    for device, points in stints.items():
        by_profile[profiles[device]].extend(points)
    fig = Figure(figsize=(9, 5.5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    # One collection per profile, however many devices and rounds: the figure's
    # artists do not grow with the fleet (100,000 segments are one LineCollection).
    # Many segments are drawn thinner and translucent, so one profile hides no other.
    crowded = sum(len(points) for points in by_profile.values()) > CROWDED
    width, alpha, size = (0.6, 0.35, 4) if crowded else (1.2, 1.0, 10)
    for profile, points in by_profile.items():
        colour = colours[profile]
        begin = np.array([p.begin for p in points]) / scale + offset
        end = np.array([p.end for p in points]) / scale + offset
        t0 = np.array([p.temp_start for p in points])
        t1 = np.array([p.temp_end for p in points])
        segments = np.stack([np.stack([begin, t0], axis=1), np.stack([end, t1], axis=1)], axis=1)
        top.add_collection(
            LineCollection(list(segments), colors=colour, linewidths=width, alpha=alpha)
        )
        top.scatter(end, t1, color=colour, s=size, alpha=alpha, linewidths=0)
        hot = np.array([p.throttled for p in points])
        if hot.any():
            top.scatter(
                end[hot],
                t1[hot],
                color="black",
                marker="x",
                s=size + 14,
                zorder=3,
                linewidths=0.6 if crowded else 1.5,
            )
        freq = np.array([p.freq_ghz for p in points])
        clocked = ~np.isnan(freq)
        bottom.scatter(
            ((begin + end) / 2)[clocked],
            freq[clocked],
            color=colour,
            s=size + 2,
            alpha=alpha,
            linewidths=0,
        )
    top.autoscale_view()
    top.set_ylabel("temperature (°C)")
    bottom.set_ylabel("average clock in round (GHz)")
    if run.by_day:
        bottom.set_xlabel("day (virtual clock: day d spans d to d + 1), each day starting cool")
        bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        bottom.set_xlabel(f"virtual clock ({unit})")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    handles: list[Artist] = [Line2D([], [], color=c, label=p) for p, c in colours.items()]
    if any(p.throttled for points in by_profile.values() for p in points):
        handles.append(Line2D([], [], color="black", marker="x", linestyle="", label="throttled"))
    legend_outside(top, handles, top=True)
    devices = f" ({len(stints):,} devices)" if len(stints) > figures_fleet.MAX_DEVICE_ROWS else ""
    top.set_title(
        title(run, f"temperature from start to end of each training, and clock{devices}"),
        fontsize=10,
    )
    return fig


def memory(run: Run) -> Figure | str:
    """Each device's highest peak training memory against its (smallest) budget.

    A device that ran a reduced memory plan (micro-batches, checkpointing) may
    peak far under its budget: what forced the plan is the full batch's
    resident set (rounds.csv `plan_needed_mb`), drawn as a hollow marker with
    a dotted line from the peak, and the plan it ran named beside the device.
    """
    peak: dict[str, float] = {}
    budget: dict[str, float] = {}
    needed: dict[str, float] = {}
    plans: dict[str, set[str]] = defaultdict(set)
    ooms: dict[str, int] = defaultdict(int)
    for row in run.rows:
        device = row.get("device", "?")
        p, b = number(row.get("peak_mem_mb")), number(row.get("mem_budget_mb"))
        n = number(row.get("plan_needed_mb"))  # absent in older run folders: NaN
        if not math.isnan(p):
            peak[device] = max(peak.get(device, 0.0), p)
        if not math.isnan(b):
            budget[device] = min(budget.get(device, math.inf), b)
        if not math.isnan(n):
            needed[device] = max(needed.get(device, 0.0), n)
            plans[device].add(_plan_label(row.get("plan", "")))
        ooms[device] += row.get("status") == "oom"
    if not peak and not budget:
        return "no device reported its memory"
    if len(set(peak) | set(budget)) > figures_fleet.MAX_DEVICE_ROWS:
        return figures_fleet.memory(run, peak, budget, ooms, needed)
    devices = [d for d in run.fleet.recorded() if d in peak or d in budget]
    fig = Figure(figsize=(7.5, max(2.5, 0.22 * len(devices) + 1.3)))
    ax = fig.subplots()
    ys = np.arange(len(devices))
    colours = [STATUS_COLOURS["oom"] if ooms[d] else STATUS_COLOURS["ok"] for d in devices]
    ax.barh(ys, [peak.get(d, 0.0) for d in devices], color=colours, height=0.6)
    known = [(y, budget[d]) for y, d in zip(ys, devices, strict=True) if d in budget]
    if known:
        ax.scatter(
            [b for _, b in known], [y for y, _ in known], marker="|", s=180, color="black", zorder=3
        )
    forced = [(y, d) for y, d in zip(ys, devices, strict=True) if d in needed]
    if forced:
        draw_needed(
            ax,
            [peak.get(d, 0.0) for _, d in forced],
            [needed[d] for _, d in forced],
            [float(y) for y, _ in forced],
        )
    values = [v for v in [*peak.values(), *budget.values(), *needed.values()] if v > 0]
    if values and max(values) / min(values) > 50:
        ax.set_xscale("log")  # MB-sized models against GB-sized budgets
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [_device_label(d, ooms[d], plans.get(d, set())) for d in devices],
        fontsize=max(4, min(8, 300 // len(devices))),
    )
    ax.invert_yaxis()
    ax.set_xlabel("training memory (MB)")
    ax.set_title(title(run, "peak training memory vs budget per device"), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    handles = [
        Patch(color=STATUS_COLOURS["ok"], label="highest peak"),
        *(
            [Patch(color=STATUS_COLOURS["oom"], label="highest peak (had oom)")]
            if any(ooms.values())
            else []
        ),
        Line2D(
            [], [], color="black", marker="|", linestyle="", markersize=12, label="budget (lowest)"
        ),
        *([needed_handle()] if forced else []),
    ]
    legend_outside(ax, handles)
    return fig


def _plan_label(plan: str) -> str:
    """The memory plan a row ran, without the batching note (`2x8 vmap3` -> `2x8`)."""
    return plan.split(" ")[0] if plan else "?"


def _device_label(device: str, ooms: int, reduced: set[str]) -> str:
    notes = [f"{ooms} oom"] if ooms else []
    if reduced:
        notes.append("ran " + ", ".join(sorted(reduced)))
    return f"{device} ({'; '.join(notes)})" if notes else device
