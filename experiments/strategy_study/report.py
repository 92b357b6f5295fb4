"""results.md: the study's tables in Markdown (mean +- sample std over seeds)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from experiments.strategy_study.tables import FAILURES, StrategyRow

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
    head = [
        "strategy",
        "reached",
        "rounds to target",
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


def day_table(days: list[dict[str, Any]]) -> list[str]:
    by_strategy: dict[str, dict[int, str]] = defaultdict(dict)
    for d in days:
        by_strategy[d["strategy"]][d["day"]] = pm((d["accuracy_mean"], d["accuracy_std"]), 100.0)
    all_days = sorted({d["day"] for d in days})
    if len(all_days) > MAX_DAY_COLUMNS:
        step = (len(all_days) - 1) / (MAX_DAY_COLUMNS - 1)
        all_days = sorted({all_days[round(i * step)] for i in range(MAX_DAY_COLUMNS)})
    lines = [
        "| strategy | " + " | ".join(f"day {d}" for d in all_days) + " |",
        "|" + "---|" * (len(all_days) + 1),
    ]
    for strategy, cells in sorted(by_strategy.items()):
        lines.append(f"| {strategy} | " + " | ".join(cells.get(d, "-") for d in all_days) + " |")
    return lines


def markdown(
    rows: list[StrategyRow],
    days: list[dict[str, Any]],
    how_target: dict[str, str],
    figures: dict[str, list[str]],
    baseline: str | None,
    incomplete: list[str] | None = None,
) -> str:
    out = [
        "# Strategy study: results",
        "",
        "Written by `experiments/strategy_study/analyze.py`; mean ± sample std over seeds.",
        "Times are virtual seconds spent in rounds, energies joules of every report",
        "(timeouts and failures included), both up to the first evaluation at or above",
        "the target; averaged over the runs that reached it (`reached`).",
        f"Failure columns ({', '.join(FAILURES)}) are report counts summed over the seeds.",
    ]
    if incomplete:
        # A failed or unfinished run is still analysed (it may have reached the
        # target before it stopped), but a reader must know it is there.
        out += ["", f"**{len(incomplete)} run(s) did not complete:**", ""]
        out += [f"- {line}" for line in incomplete]
    experiments = sorted({r.experiment for r in rows})
    for experiment in experiments:
        mine = [r for r in rows if r.experiment == experiment]
        out += [
            "",
            f"## {experiment} (scenario `{mine[0].scenario}`)",
            "",
            f"Target accuracy {100 * mine[0].target:.1f}% ({how_target[experiment]}).",
            "",
            *strategy_table(mine, baseline),
            "",
            "Test accuracy (%) per day (rounds scenario: per round; day 0 = before training):",
            "",
            *day_table([d for d in days if d["experiment"] == experiment]),
            "",
        ]
        out += [f"![{name}]({name})" for name in figures.get(experiment, [])]
    return "\n".join(out) + "\n"
