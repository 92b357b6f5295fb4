"""One look for every figure: colours that mean the same thing everywhere, units, files.

A strategy keeps its colour in every figure and every analysis (a fixed
colour per strategy in strategies/, variants of one strategy differ by line
style); a status keeps its colour (ok is green, timeout orange, ...).
Axes carry units, round and day axes integer ticks, and legends sit
outside the data. Every figure is written as PNG (for a look) and PDF (for
a paper).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: analyses run on headless servers and in CI
import matplotlib.pyplot as plt  # noqa: E402 - after the backend choice
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from fedbench.report.records import STATUSES  # noqa: E402

FORMATS: tuple[str, ...] = ("png", "pdf")
DPI = 150

NOT_PICKED = "not picked"
STATUS_COLOURS: dict[str, str] = {
    NOT_PICKED: "#f0f0f0",
    "ok": "#2a9d8f",
    "oom": "#7b2cbf",
    "dropped": "#8d99ae",
    "timeout": "#f4a261",
    "failed": "#d62828",
}
# The strategies in strategies/, each its own colour (colour-blind safe Okabe-Ito + greys).
STRATEGY_COLOURS: dict[str, str] = {
    "random": "#555555",
    "oort": "#0072b2",
    "tifl": "#e69f00",
    "fedcs": "#009e73",
    "power_of_choice": "#cc79a7",
    "eafl": "#56b4e9",
    "heteroaware": "#d55e00",
}
# For anything else (a new strategy, a sweep over another parameter): in order.
EXTRA_COLOURS: tuple[str, ...] = (
    "#882255",
    "#44aa99",
    "#999933",
    "#aa4499",
    "#332288",
    "#88ccee",
    "#117733",
    "#f0e442",  # yellow last: faint on white
)
# Runs labelled by the server's choices (`random [fedbuff]`): a colour per choice, in order.
ARM_COLOURS: tuple[str, ...] = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#555555")
LINE_STYLES: tuple[str, ...] = ("-", "--", ":", "-.")
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P")


def base_strategy(label: str) -> str:
    """'heteroaware(deadline_s=1.3)' -> 'heteroaware'; 'random [fedbuff]' -> 'random'."""
    return label.split(" [", 1)[0].split("(", 1)[0]


def arm_of(label: str) -> str:
    """'random [synchronous, deadline]' -> 'synchronous, deadline'; '' without one."""
    return label.split(" [", 1)[1].rstrip("]") if " [" in label else ""


def strategy_styles(labels: Iterable[str]) -> dict[str, dict[str, str]]:
    """Colour, line style and marker per label, the same for a label in every figure.

    Labels that differ by the server's choices (mode, round close, algorithm)
    are coloured by that choice: it is what such a comparison is about.
    Otherwise each strategy keeps its colour; variants differ by line style.
    """
    ordered = sorted(set(labels))
    arms = sorted({arm_of(label) for label in ordered})
    by_arm = len(arms) > 1
    extra: dict[str, str] = {}
    variant: dict[str, int] = {}
    out: dict[str, dict[str, str]] = {}
    for label in ordered:
        base = base_strategy(label)
        key = arm_of(label) if by_arm else base
        if by_arm:
            colour = ARM_COLOURS[arms.index(key) % len(ARM_COLOURS)]
        else:
            if base not in STRATEGY_COLOURS and base not in extra:
                extra[base] = EXTRA_COLOURS[len(extra) % len(EXTRA_COLOURS)]
            colour = STRATEGY_COLOURS.get(base) or extra[base]
        n = variant.get(key, 0)
        variant[key] = n + 1
        out[label] = {
            "color": colour,
            "linestyle": LINE_STYLES[n % len(LINE_STYLES)],
            "marker": MARKERS[n % len(MARKERS)],
        }
    return out


def profile_colours(profiles: Sequence[str]) -> dict[str, str]:
    """A colour per device profile (tab10/tab20 in order of first appearance)."""
    unique = list(dict.fromkeys(profiles))
    if len(unique) <= 10:
        colours = [plt.get_cmap("tab10")(i) for i in range(10)]
    else:  # tab20's dark shades first, then the light ones: neighbours stay distinct
        tab20 = plt.get_cmap("tab20")
        colours = [tab20(i) for i in [*range(0, 20, 2), *range(1, 20, 2)]]
    return {p: matplotlib.colors.to_hex(colours[i % len(colours)]) for i, p in enumerate(unique)}


# Submodel width rates (docs/submodels.md): a ramp over log2 of the rate, the same colour for
# a rate in every figure; the whole model (rate 1) is drawn black and thicker.
WHOLE_MODEL_COLOUR = "#000000"
RATE_RAMP = "viridis"
SMALLEST_RATE = 1 / 16  # HeteroFL's smallest width: the ramp's far end


def rate_label(rate: float) -> str:
    """0.0625 -> '1/16', 0.5 -> '1/2', 1 -> '1 (whole model)'."""
    if rate >= 1:
        return "1 (whole model)"
    return str(Fraction(rate).limit_denominator(256))


def rate_colour(rate: float) -> str:
    """A rate's colour: dark blue near the whole model, yellow-green at 1/16 and below."""
    if rate >= 1:
        return WHOLE_MODEL_COLOUR
    span = math.log2(1 / SMALLEST_RATE)
    t = min(1.0, max(0.0, math.log2(1 / rate) / span))
    # Only 0.15-0.85 of the ramp: its dark end is near black, its yellow end faint on white.
    return matplotlib.colors.to_hex(plt.get_cmap(RATE_RAMP)(0.15 + 0.7 * t))


DAY_S = 86_400.0  # a day of the virtual clock (fedbench.scenarios.daily starts day 1 at 0 s)


def time_unit(max_seconds: float) -> tuple[float, str]:
    """(divisor, unit) for a time axis: s, min, h or days, whichever reads best."""
    if not math.isfinite(max_seconds) or max_seconds < 300:
        return 1.0, "s"
    if max_seconds < 3 * 3600:
        return 60.0, "min"
    if max_seconds < 3 * DAY_S:
        return 3600.0, "h"
    return DAY_S, "days"


def energy_unit(max_joules: float) -> tuple[float, str]:
    if not math.isfinite(max_joules) or max_joules < 10_000:
        return 1.0, "J"
    if max_joules < 10_000_000:
        return 1000.0, "kJ"
    return 1e6, "MJ"


def amount(value: float) -> str:
    """1,234 or 12.3: three significant digits, no exponent."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def integer_axis(ax: Axes, axis: str = "x") -> None:
    """Rounds and days are whole numbers: no 2.5 on their axis."""
    locator = MaxNLocator(integer=True)
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(locator)


def legend_outside(
    ax: Axes,
    handles: Sequence[Artist] | None = None,
    top: bool = False,
    gap: float = 0.01,
    title: str | None = None,
) -> None:
    """The legend right of the axes, where it hides no data (`top`: aligned with the top;
    `gap`: more room for labels on the right axis; `title`: what its entries are)."""
    shown = list(handles) if handles is not None else ax.get_legend_handles_labels()[0]
    if shown:
        ax.legend(
            handles=shown,
            loc="upper left" if top else "center left",
            bbox_to_anchor=(1.0 + gap, 1.0 if top else 0.5),
            fontsize=8,
            title=title,
            title_fontsize=8,
            frameon=False,
        )


# What the full batch would need where the memory planner ran a reduced plan
# (rounds.csv plan_needed_mb): hollow, so it reads as memory not used.
NEEDED_COLOUR = "#e76f51"


def needed_handle() -> Line2D:
    """The legend entry of `draw_needed`."""
    return Line2D(
        [],
        [],
        color=NEEDED_COLOUR,
        marker="D",
        markerfacecolor="none",
        linestyle=":",
        markersize=6,
        label="full batch would need (the plan was reduced)",
    )


def draw_needed(
    ax: Axes, peaks: Sequence[float], needed: Sequence[float], ys: Sequence[float]
) -> None:
    """Hollow markers at what the full batch would need, a dotted line from each peak.

    Why a device far under its budget ran micro-batches: the full batch's
    resident set did not fit.
    """
    ax.hlines(ys, peaks, needed, colors=NEEDED_COLOUR, linestyles=":", linewidth=1.2, zorder=2)
    ax.scatter(
        needed,
        ys,
        marker="D",
        s=36,
        facecolors="none",
        edgecolors=NEEDED_COLOUR,
        linewidths=1.4,
        zorder=4,
        label="full batch would need",
    )


def save(fig: Figure, stem: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write `stem`.png/.pdf (tight: legends outside the axes are kept) and close the figure."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    renderer = FigureCanvasAgg(fig).get_renderer()
    if fig.get_layout_engine() is not None:
        fig.draw_without_rendering()  # a constrained layout is only laid out when drawn
    # The tight box once for every format (bbox_inches="tight" lays the figure out per file).
    box = fig.get_tightbbox(renderer).padded(0.08)
    paths = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        # No creation date in a PDF: the same figure gives the same file, so a regenerated
        # study (experiments/reproduce.py) changes only the figures whose data changed.
        meta = {"CreationDate": None} if fmt == "pdf" else None
        fig.savefig(path, dpi=DPI, bbox_inches=box, metadata=meta)
        paths.append(path)
    plt.close(fig)
    return paths


def status_bars(
    ax: Axes,
    devices: Sequence[str],
    by_status: Mapping[str, Sequence[float]],
    xlabel: str,
    legend: bool = True,
) -> np.ndarray:
    """One horizontal bar per device (or profile), stacked by how its rounds ended, top down;
    returns each bar's length."""
    left = np.zeros(len(devices))
    for status in STATUSES:
        values = np.asarray(by_status.get(status, [0.0] * len(devices)), dtype=float)
        if values.any():
            ax.barh(
                range(len(devices)), values, left=left, color=STATUS_COLOURS[status], label=status
            )
            left += values
    ax.set_yticks(range(len(devices)))
    ax.set_yticklabels(devices, fontsize=max(4, min(8, 300 // max(len(devices), 1))))
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    if legend:
        legend_outside(ax)
    return left
