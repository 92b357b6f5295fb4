"""`python -m fedbench.fleet describe <overrides>`: the drawn population, printed and plotted.

An entry point. The fleet's expansion into devices is fedbench.experiment.fleet
(`expand_fleet`, re-exported here for older imports).

The overrides are the experiment's (`fleet=phones_100 +fleet.scale=1000
model=...`); the population is the one a run with them would draw (same
seed), and the predicted round time and energy are the server's
predictions for the experiment's model and training (fedbench.server.
fleet_view). `plot=PATH` names the figure (default
population_<fleet>_<devices>.png in the current folder).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedbench.core.device import DeviceSpec
from fedbench.errors import FedbenchError
from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.population.draw import Population
from fedbench.population.meter import radio_energy_j
from fedbench.population.windows import DAY_S

__all__ = ["DeviceSpec", "Described", "describe", "expand_fleet", "main"]

USAGE = (
    "usage: python -m fedbench.fleet describe [plot=PNG] <experiment overrides>, "
    "e.g. python -m fedbench.fleet describe fleet=phones_100 +fleet.scale=1000"
)


@dataclass(frozen=True)
class Described:
    """Every per-device figure the table and the plot show (NaN: not applicable)."""

    name: str
    experiment: Experiment
    population: Population | None
    columns: dict[str, np.ndarray]  # label (with unit) -> one value per device
    available_by_hour: np.ndarray  # share of the fleet in a window, every 10 min of day 1


def describe(experiment: Experiment) -> Described:
    from fedbench.experiment.build import build_model
    from fedbench.scenarios.base import build_scenario
    from fedbench.scenarios.context import data_context
    from fedbench.server.fleet_view import FleetView

    devices = expand_fleet(experiment.fleet)
    ledger = Ledger(devices)
    view = FleetView(devices, experiment)
    model = build_model(experiment.model)
    scenario = build_scenario(experiment)
    view.predict(ledger, model, experiment, scenario, data_context(experiment, len(devices)))
    model_bytes = sum(v.numel() * v.element_size() for v in model.state_dict().values())
    pop = view.population
    hours = np.arange(0, 24, 1 / 6) * 3600.0 + DAY_S  # day 1, every 10 minutes
    columns: dict[str, np.ndarray] = {
        "predicted round time (s)": ledger.pred_latency_s + ledger.pred_comm_s,
        "predicted training energy (J)": ledger.pred_energy_j,
    }
    if pop is None:
        by_hour = np.array([_available(view, ledger, t) for t in hours])
        return Described(experiment.fleet.name, experiment, None, columns, by_hour)
    radio = radio_energy_j(pop.down_mbps, pop.up_mbps, pop.rtt_ms, pop.cellular, model_bytes)
    columns["predicted round energy incl. radio (J)"] = ledger.pred_energy_j + radio
    columns.update(
        {
            "speed factor (x profile)": pop.speed,
            "download (Mbit/s)": pop.down_mbps,
            "upload (Mbit/s)": pop.up_mbps,
            "RTT (ms)": pop.rtt_ms,
            "hours available per day (h)": pop.windows.hours_per_day(),
            "hours charging per day (h)": pop.windows.hours_per_day(charging=True),
            "battery capacity (Wh)": pop.capacity_wh,
            "initial battery (%)": pop.battery0_pct,
            "idle drain (W)": pop.idle_w,
            "charging power (W)": pop.charge_w,
        }
    )
    by_hour = np.array([pop.windows.inside(t).mean() for t in hours])
    return Described(experiment.fleet.name, experiment, pop, columns, by_hour)


def _available(view: object, ledger: Ledger, t: float) -> float:
    view.update_availability(ledger, t)  # type: ignore[attr-defined]
    return float(ledger.available.mean())


def table(d: Described) -> str:
    n = len(next(iter(d.columns.values())))
    head = (
        f"fleet {d.name}: {n:,} devices, seed {d.experiment.seed}, model {d.experiment.model.name}"
    )
    if d.population is None:
        head += " (no fleet.population: every device is its profile)"
    else:
        pop = d.population
        head += (
            f"; {pop.cellular.mean():.0%} on cellular, "
            f"{np.isnan(pop.capacity_wh).mean():.0%} on mains, "
            f"battery floor {pop.floor_pct:g}%"
        )
    width = max(len(k) for k in d.columns)
    lines = [head, f"{'':<{width}}  {'distinct':>8} {'p5':>9} {'p50':>9} {'p95':>9}"]
    for label, values in d.columns.items():
        finite = values[np.isfinite(values)]
        if not len(finite):
            lines.append(f"{label:<{width}}  {0:>8} {'-':>9} {'-':>9} {'-':>9}")
            continue
        p5, p50, p95 = np.percentile(finite, [5, 50, 95])
        distinct = len(np.unique(finite))
        lines.append(f"{label:<{width}}  {distinct:>8,} {p5:>9.3g} {p50:>9.3g} {p95:>9.3g}")
    by = d.available_by_hour
    low, peak = int(np.argmin(by)), int(np.argmax(by))
    lines.append(
        f"in an availability window over day 1: {by.min():.0%} at {_clock(low)} (least), "
        f"{by.max():.0%} at {_clock(peak)} (most)"
    )
    return "\n".join(lines)


def _clock(step: int) -> str:
    return f"{step // 6:02d}:{step % 6 * 10:02d}"


def plot(d: Described, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in d.columns if np.isfinite(d.columns[k]).any()]
    cols = 4
    rows = (len(panels) + 1 + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows))
    flat = list(np.atleast_1d(axes).ravel())
    n = len(next(iter(d.columns.values())))
    for ax, label in zip(flat, panels, strict=False):
        values = d.columns[label]
        values = values[np.isfinite(values)]
        spread = values.max() / values.min() if values.min() > 0 else 1.0
        bins: int | np.ndarray = 40
        if spread > 30:  # bandwidths, round times: a log axis shows the body and the tail
            bins = np.geomspace(values.min(), values.max(), 40)
            ax.set_xscale("log")
        ax.hist(values, bins=bins, color="tab:blue", edgecolor="white", linewidth=0.3)
        ax.set_xlabel(label)
        ax.set_ylabel("devices")
        median = float(np.median(values))
        ax.axvline(median, color="tab:red", linewidth=1)
        unit = label.rsplit("(", 1)[-1].rstrip(")") if "(" in label else ""
        ax.set_title(f"median {median:.3g} {unit}", fontsize=9)
    ax = flat[len(panels)]
    by = d.available_by_hour
    ax.plot(np.arange(len(by) + 1) / 6, np.append(by, by[0]) * 100)
    ax.set_xlim(0, 24)
    ax.set_ylim(0, 100)
    ax.set_xticks(range(0, 25, 4))
    ax.set_xlabel("hour of day")
    ax.set_ylabel("devices in a window (%)")
    ax.set_title("availability windows over a day", fontsize=9)
    for extra in flat[len(panels) + 1 :]:
        extra.set_visible(False)
    fig.suptitle(
        f"fleet {d.name}: {n:,} devices (seed {d.experiment.seed}), "
        f"model {d.experiment.model.name}; red line: median"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def help_text() -> str:
    return "\n".join(
        [
            "usage: python -m fedbench.fleet describe [plot=PNG] [experiment overrides ...]",
            "",
            "The population a run with these overrides would draw (same seed), printed and",
            "plotted, with the server's predicted round time and energy for its model.",
            "",
            "keys:",
            "  plot=PNG             the figure (default: population_<fleet>_<devices>.png here)",
            "  <group>=<option>     any override of python -m fedbench (fleet=, model=, seed=,",
            "  <key.path>=<value>   +fleet.scale=, ...); python -m fedbench --help lists them",
            "",
            "examples:",
            "  python -m fedbench.fleet describe fleet=phones_100 +fleet.scale=1000",
            "  python -m fedbench.fleet describe fleet=edge_mixed plot=edge_mixed.png",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    items = list(sys.argv[1:] if argv is None else argv)
    if any(i in ("-h", "--help") for i in items) or not items:
        print(help_text(), file=sys.stdout if items else sys.stderr)
        return 0 if items else 2
    try:
        return _describe(items)
    except FedbenchError as exc:
        print(f"fedbench.fleet: error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 2


def _describe(items: list[str]) -> int:
    from fedbench.experiment.compose import compose_experiment
    from fedbench.folders import check_file

    if items[0] != "describe":
        raise FedbenchError(f"{items[0]!r}: expected the command describe; {USAGE}")
    flags = [i for i in items[1:] if i.startswith("-")]
    if flags:
        raise FedbenchError(
            f"{flags[0]}: not an option; give plot=PNG and experiment overrides as key=value "
            "(python -m fedbench.fleet describe --help)"
        )
    overrides = [i for i in items[1:] if not i.startswith("plot=")]
    plots = [i.split("=", 1)[1] for i in items[1:] if i.startswith("plot=")]
    if plots:
        check_file("plot", plots[-1])  # before minutes of drawing, not after
    experiment = compose_experiment(overrides)
    d = describe(experiment)
    n = len(next(iter(d.columns.values())))
    path = Path(plots[-1] if plots else f"population_{d.name}_{n}.png")
    if not plots:
        check_file("plot", path)
    print(table(d))
    print(f"figure -> {plot(d, path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
