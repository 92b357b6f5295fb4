"""A run's learning curves and its selection fairness.

Each function draws one figure of one run and returns it, or returns the
reason it has nothing to draw (a run with no evaluation has no curve; a
fleet of host devices measured no energy). fedbench.analyze.analyze_run
saves them; FIGURES lists them in the order a reader looks.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from matplotlib.figure import Figure

import fedbench.analyze.figures_fleet as figures_fleet
from fedbench.analyze.runs import Run, module_of, number, participation_fairness
from fedbench.analyze.style import (
    energy_unit,
    integer_axis,
    legend_outside,
    rate_colour,
    rate_label,
    status_bars,
    time_unit,
)
from fedbench.core.records import STATUSES

NO_ENERGY = "no report has an energy figure (host devices and stock clients measure none)"
NOT_SUBMODEL = "not a submodel run (algorithm=heterofl, fjord or fedrolex: docs/submodels.md)"


def step_name(run: Run) -> str:
    """What one step of the x axis is: a day (daily scenario) or a round."""
    return "day" if run.by_day else "round"


def start_label(run: Run) -> str:
    """What the evaluation before any device trained measured."""
    model = "pretrained" if run.pretrained else "initial model"
    return f"{step_name(run)} 0 ({model})"


def title(run: Run, what: str) -> str:
    """`<experiment> (<strategy>, seed <n>)`, and the app for a run of a user's app (app=)."""
    app = run.config.get("app")
    name = app.get("name") if isinstance(app, dict) else None
    who = f"app {name}, {run.strategy}" if name else run.strategy
    return f"{run.experiment} ({who}, seed {run.seed}): {what}"


def wilson_interval(p: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval of an accuracy `p` over `n` test examples (95% by default).

    An accuracy is a binomial proportion; Wilson's interval stays inside [0, 1]
    and is honest near 0 and 1, where p +- z*sqrt(p(1-p)/n) is not. NaN when
    `n` is unknown.
    """
    if not (n >= 1 and 0.0 <= p <= 1.0):
        return (math.nan, math.nan)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def accuracy(run: Run) -> Figure | str:
    """Test accuracy after each day (daily) or evaluated round."""
    if not run.evaluations:
        return "no evaluation (the run stopped before evaluating the first model)"
    fig = Figure(figsize=(7.5, 4))
    ax = fig.subplots()
    steps = [e.day if run.by_day else e.round for e in run.evaluations]
    acc = [100 * e.accuracy for e in run.evaluations]
    band = [wilson_interval(e.accuracy, e.examples) for e in run.evaluations]
    if all(np.isfinite(b).all() for b in band):
        n = int(run.evaluations[-1].examples)
        ax.fill_between(
            steps,
            [100 * lo for lo, _ in band],
            [100 * hi for _, hi in band],
            color="#0072b2",
            alpha=0.15,
            linewidth=0,
            label=f"binomial 95% interval ({n} test examples)",
        )
    ax.plot(steps, acc, marker="o", color="#0072b2", label="test accuracy")
    first = run.evaluations[0]
    if first.round == 0:
        ax.axhline(
            acc[0],
            color="grey",
            linestyle="--",
            linewidth=1,
            label=f"{start_label(run)}: {acc[0]:.2f}%",
        )
    ax.set_xlabel(step_name(run))
    ax.set_ylabel("test accuracy (%)")
    integer_axis(ax)
    ax.set_title(title(run, f"test accuracy per {step_name(run)}"), fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    return fig


def accuracy_per_rate(run: Run) -> Figure | str:
    """Test accuracy of each width rate's submodel per round or day (submodel algorithms).

    What a device of each rate could deploy: the first ceil(r C) channels of
    the global model (docs/submodels.md). Each legend entry says how many
    device-rounds trained at that rate (rounds.csv `model_rate`, status ok):
    a rate no device trained is only evaluated, its channels trained by the
    wider ones. A rate missing on some day (a run resumed from an old
    checkpoint, a damaged summary) leaves its line short, never a made-up point.
    """
    if not run.accuracy_per_rate:
        return NOT_SUBMODEL
    # summary.json keys the rates by day; a rounds run's day is its round (scenarios/rounds.py),
    # other scenarios' by the evaluation of that day.
    step_of = {e.day: e.day if run.by_day else e.round for e in run.evaluations}
    curves: dict[float, list[tuple[int, float]]] = {}
    for day, rates in run.accuracy_per_rate.items():
        for rate, value in rates.items():
            curves.setdefault(rate, []).append((step_of.get(day, day), 100 * value))
    trained = _trained_per_rate(run)
    fig = Figure(figsize=(7.5, 4))
    ax = fig.subplots()
    many = max(len(points) for points in curves.values()) > 40
    for rate in sorted(curves, reverse=True):  # legend top down: the whole model first
        steps, values = zip(*sorted(curves[rate]), strict=True)
        whole = rate >= 1
        count = f": {trained.get(rate, 0):,}" if trained else ""
        ax.plot(
            steps,
            values,
            color=rate_colour(rate),
            linewidth=2.2 if whole else 1.4,
            marker=None if many else "o",
            markersize=4 if whole else 3,
            zorder=3 if whole else 2,
            label=f"{rate_label(rate)}{count}",
        )
    ax.set_xlabel(step_name(run))
    ax.set_ylabel("test accuracy (%)")
    integer_axis(ax)
    algorithm = run.config.get("algorithm") or {}
    name = module_of(str(algorithm.get("_target_", ""))) if isinstance(algorithm, dict) else ""
    policy = algorithm.get("rate_policy") if isinstance(algorithm, dict) else None
    how = f"{name}, rates by {policy}: " if name and policy else f"{name}: " if name else ""
    ax.set_title(title(run, f"{how}accuracy of each width rate"), fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(
        ax, title="width rate: device-rounds\ntrained at it" if trained else "width rate"
    )
    return fig


def _trained_per_rate(run: Run) -> dict[float, int]:
    """Width rate -> device-rounds that trained it and were aggregated ({}: no model_rate)."""
    counts: Counter[float] = Counter()
    for row in run.rows:
        rate = number(row.get("model_rate"))
        if row.get("status") == "ok" and math.isfinite(rate):
            counts[float(f"{rate:g}")] += 1  # as summary.json names it (evaluation.py)
    return dict(counts)


def time_axis(run: Run) -> tuple[list[float], str]:
    """x values of the evaluations on the virtual time axis, and its label (without unit).

    Plain rounds: the virtual clock. Daily: the virtual time spent in rounds
    - the clock would be dominated by the idle hours between days, which are
    the same whatever the strategy does.
    """
    if run.by_day:
        return [e.time_s for e in run.evaluations], "virtual time in rounds, nights excluded"
    clock = [e.clock_s if np.isfinite(e.clock_s) else e.time_s for e in run.evaluations]
    return clock, "virtual clock"


def accuracy_vs_time(run: Run) -> Figure | str:
    """Time-to-accuracy (FedScale, Oort): accuracy against the virtual clock."""
    if len(run.evaluations) < 2:
        return "no evaluation after a round"
    xs, label = time_axis(run)
    scale, unit = time_unit(max(xs))
    points = [(x / scale, e.accuracy) for x, e in zip(xs, run.evaluations, strict=True)]
    return _curve(run, points, "#0072b2", f"{label} ({unit})", "accuracy vs virtual time")


def accuracy_vs_energy(run: Run) -> Figure | str:
    """Accuracy against the energy every device spent so far (failed rounds included)."""
    known = [(e.energy_j, e.accuracy) for e in run.evaluations if np.isfinite(e.energy_j)]
    if not run.energy_known or len(known) < 2:
        return NO_ENERGY
    scale, unit = energy_unit(max(p[0] for p in known))
    unknown = sum(1 for row in run.rows if row.get("energy_j", "") == "")
    note = f"; {unknown} reports without energy not counted" if unknown else ""
    return _curve(
        run,
        [(joules / scale, accuracy) for joules, accuracy in known],
        "#d55e00",
        f"cumulative energy of all devices ({unit}{note})",
        "accuracy vs energy spent",
    )


def _curve(
    run: Run, points: list[tuple[float, float]], colour: str, xlabel: str, what: str
) -> Figure:
    """One run's accuracy after each evaluation against some running total."""
    fig = Figure(figsize=(7.5, 4))
    ax = fig.subplots()
    ax.plot([p[0] for p in points], [100 * p[1] for p in points], marker="o", color=colour)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"test accuracy after each {step_name(run)} (%)")
    ax.set_title(title(run, what), fontsize=10)
    ax.grid(alpha=0.3)
    return fig


def fairness(run: Run) -> Figure | str:
    """How often each device was picked, split by how its rounds ended; Jain's index."""
    if not run.rows:
        return "no device was picked"
    if run.fleet.size > figures_fleet.MAX_DEVICE_ROWS:
        return figures_fleet.fairness(run)
    devices = run.fleet.names()
    counts = {s: [0] * len(devices) for s in STATUSES}
    index = {d: i for i, d in enumerate(devices)}
    for row in run.rows:
        status = row.get("status", "")
        if status in counts and row.get("device") in index:
            counts[status][index[row["device"]]] += 1
    fig = Figure(figsize=(7.5, max(2.5, 0.18 * len(devices) + 1.3)))
    ax = fig.subplots()
    status_bars(ax, devices, counts, "rounds picked (by how the round ended)")
    integer_axis(ax)
    never = run.fleet.size - len(run.selections)
    jain = participation_fairness(run)
    ax.set_title(
        title(
            run,
            f"selection fairness: Jain's index {jain:.2f}, {never} of "
            f"{run.fleet.size} devices never picked",
        ),
        fontsize=10,
    )
    return fig
