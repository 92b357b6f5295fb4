"""results.md: the comparison in Markdown (mean ± sample sd over seeds)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from fedbench.analyze.tables import FAILURES, StrategyRow

# At most this many day columns in the accuracy-per-day table (results.csv has all).
MAX_DAY_COLUMNS = 11


def pm(value: tuple[float, float], scale: float = 1.0, digits: int = 1) -> str:
    mean, std = value
    if math.isnan(mean):
        return "-"
    if math.isnan(std):
        return f"{mean * scale:.{digits}f}"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


def ratio(value: float, reference: float) -> str:
    if math.isnan(value) or math.isnan(reference) or reference == 0:
        return "-"
    return f"{value / reference:.2f}x"


def strategy_table(rows: list[StrategyRow], baseline: str | None) -> list[str]:
    base = next((r for r in rows if r.strategy == baseline), None)
    step = "days" if rows and rows[0].scenario == "daily" else "rounds"
    head = [
        "strategy",
        "reached",
        f"{step} to target",
        "time to target (s)",
        "energy to target (J)",
        "final accuracy (%)",
        "total time (s)",
        "total energy (J)",
        "Jain",
        *FAILURES,
    ]
    if base is not None:
        head[5:5] = [f"time vs {baseline}", f"energy vs {baseline}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r.strategy,
            f"{r.reached}/{r.runs}",
            pm(r.round_to_target),
            pm(r.time_to_target_s),
            pm(r.energy_to_target_j),
            pm(r.final_accuracy, 100.0),
            pm(r.total_time_s),
            pm(r.total_energy_j),
            pm(r.jain, digits=2),
            *(str(r.failures[s]) for s in FAILURES),
        ]
        if base is not None:
            cells[5:5] = [
                ratio(r.time_to_target_s[0], base.time_to_target_s[0]),
                ratio(r.energy_to_target_j[0], base.energy_to_target_j[0]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def day_table(days: list[dict[str, Any]], scenario: str) -> list[str]:
    by_strategy: dict[str, dict[int, str]] = defaultdict(dict)
    for d in days:
        by_strategy[d["strategy"]][d["day"]] = pm((d["accuracy_mean"], d["accuracy_std"]), 100.0)
    all_days = sorted({d["day"] for d in days})
    if len(all_days) > MAX_DAY_COLUMNS:
        step = (len(all_days) - 1) / (MAX_DAY_COLUMNS - 1)
        all_days = sorted({all_days[round(i * step)] for i in range(MAX_DAY_COLUMNS)})
    unit = "day" if scenario == "daily" else "round"
    lines = [
        "| strategy | " + " | ".join(f"{unit} {d}" for d in all_days) + " |",
        "|" + "---|" * (len(all_days) + 1),
    ]
    for strategy, cells in sorted(by_strategy.items()):
        lines.append(f"| {strategy} | " + " | ".join(cells.get(d, "-") for d in all_days) + " |")
    return lines


def tables(rows: list[StrategyRow], how_target: dict[str, str], baseline: str | None) -> str:
    """The comparison table of every experiment (what `compare` returns and prints)."""
    out: list[str] = []
    for experiment in sorted({r.experiment for r in rows}):
        mine = [r for r in rows if r.experiment == experiment]
        target = mine[0].target
        reach = f"{100 * target:.1f}%" if math.isfinite(target) else "none (no evaluation)"
        out += [
            f"## {experiment} (scenario `{mine[0].scenario}`)",
            "",
            f"Target accuracy {reach} ({how_target[experiment]}).",
            "",
            *strategy_table(mine, baseline),
            "",
        ]
    return "\n".join(out)


def markdown(
    rows: list[StrategyRow],
    days: list[dict[str, Any]],
    how_target: dict[str, str],
    figures: dict[str, list[str]],
    baseline: str | None,
    incomplete: list[str] | None = None,
    title: str = "Comparison",
) -> str:
    out = [
        f"# {title}",
        "",
        "Written by `python -m fedbench.analyze`; mean ± sample sd over seeds.",
        "Times are virtual seconds (plain rounds: the virtual clock; daily: the time spent",
        "in rounds, without the idle hours between days), energies joules of every report",
        "(timeouts and failures included), both up to the first evaluation at or above",
        "the target; averaged over the runs that reached it (`reached`).",
        f"Failure columns ({', '.join(FAILURES)}) are report counts summed over the seeds.",
        "Jain: Jain's fairness index of how often each device of the fleet was picked",
        "(1 = evenly, 1/n = one device).",
    ]
    if incomplete:
        # A failed or unfinished run is still analysed (it may have reached the
        # target before it stopped), but a reader must know it is there.
        out += ["", f"**{len(incomplete)} run(s) did not complete:**", ""]
        out += [f"- {line}" for line in incomplete]
    for experiment in sorted({r.experiment for r in rows}):
        mine = [r for r in rows if r.experiment == experiment]
        unit = "day" if mine[0].scenario == "daily" else "round"
        out += [
            "",
            tables(mine, how_target, baseline).rstrip(),
            "",
            f"Test accuracy (%) per {unit} ({unit} 0 = before any device trained):",
            "",
            *day_table([d for d in days if d["experiment"] == experiment], mine[0].scenario),
            "",
        ]
        out += [f"![{name}]({name})" for name in figures.get(experiment, [])]
    return "\n".join(out) + "\n"
