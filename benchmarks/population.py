"""Population cost at fleet scale: drawing it, and moving its batteries a day on.

For fleets of 1,000 / 10,000 / 100,000 phones (fedbench/conf/fleet/phones_100.yaml's
profile mix, scaled) with the default distributions
(fedbench/conf/fleet/population/phones.yaml): the median wall time of `draw` (every
column from the seed), of one availability query at a virtual time, and of
moving every battery one virtual day on (idle drain and charging, edge to
edge: what the server does before each round of a daily run).

    python benchmarks/population.py                  # 1k, 10k, 100k
    python benchmarks/population.py sizes=1000 repeats=3
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
import yaml

from fedbench.cli.grammar import Grammar, Key, parse_int
from fedbench.devices.profile import load_profile
from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.population import PopulationConfig
from fedbench.experiment.typed import parse
from fedbench.paths import conf_dir
from fedbench.population.draw import draw
from fedbench.population.windows import DAY_S, advance

GRAMMAR = Grammar(
    "python benchmarks/population.py",
    "Time drawing a phone population and moving its batteries a day on.",
    (
        Key("sizes", "fleet sizes, comma-separated", "1000,10000,100000"),
        Key("repeats", "timed repetitions (the median is printed)", "5"),
    ),
    ("python benchmarks/population.py", "python benchmarks/population.py sizes=1000 repeats=3"),
)


def _median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(argv: Sequence[str]) -> None:
    args = GRAMMAR.parse(argv)
    sizes = [int(s) for s in args.values.get("sizes", "1000,10000,100000").split(",")]
    repeats = parse_int("repeats", args.values.get("repeats", "5"), 1)
    fleet = yaml.safe_load((conf_dir() / "fleet" / "phones_100.yaml").read_text())
    fleet.pop("defaults", None)
    config = parse(
        PopulationConfig,
        yaml.safe_load((conf_dir() / "fleet" / "population" / "phones.yaml").read_text()),
        "fleet.population",
    )
    print(f"{'devices':>8} {'draw_s':>8} {'available_s':>12} {'battery_day_s':>14}")
    for n in sizes:
        print(_row(n, config, fleet, repeats))


def _row(n: int, config: PopulationConfig, fleet: dict, repeats: int) -> str:
    devices = expand_fleet({**fleet, "scale": n})
    names = list(dict.fromkeys(d.profile for d in devices))
    profiles = [load_profile(p) for p in names]
    code = np.array([names.index(d.profile) for d in devices], dtype=np.int32)
    pop = draw(config, profiles, code, 0)
    t_draw = _median_s(lambda: draw(config, profiles, code, 0), repeats)
    t_inside = _median_s(lambda: pop.windows.inside(3 * 3600.0), repeats)
    t0 = np.full(n, 2 * 3600.0)
    day = DAY_S + 2 * 3600.0
    w = pop.windows
    t_day = _median_s(
        lambda: advance(pop.battery0_pct, t0, day, w, pop.idle_w, pop.charge_w, pop.capacity_wh),
        repeats,
    )
    return f"{n:>8} {t_draw:>8.3f} {t_inside:>12.4f} {t_day:>14.3f}"


if __name__ == "__main__":
    sys.exit(GRAMMAR.main(run, None))
