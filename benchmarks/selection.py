"""Selection overhead: one round of `select()` + `Ledger.record()` at fleet scale.

For fleets of 1,000 / 10,000 / 100,000 registered devices (fedbench/conf/fleet/
phones_100.yaml scaled, so the profile mix is realistic) with 100 devices
picked per round, every strategy in fedbench/conf/strategy/ runs `--rounds` rounds on
a fabricated ledger: profile-like predictions for every device, a history
for half of them (so exploration and exploitation both have work), and
each round's picks fed back as 100 fabricated RoundReports through
`Ledger.record`, as the server does. Reported per strategy and size: the
median wall time of select(), of record(), and their sum (the target is
< 0.5 s per round at 100,000 devices). Also the ledger's memory per device:
the bytes of its arrays (plus the plan list's pointers) / n, and the
tracemalloc growth of building it, against the fleet's (columnar: a few numbers a group).

    python benchmarks/selection.py                  # 1k, 10k, 100k
    python benchmarks/selection.py sizes=1000 rounds=5
"""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc

import numpy as np
import yaml
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_ints, script
from fedbench.core.records import RoundReport
from fedbench.experiment.fleet import Fleet, expand_fleet, fleet_index
from fedbench.ledger import Ledger
from fedbench.paths import conf_dir
from strategies.base import SelectionStrategy

PER_ROUND = 100
# FedCS sizes its own rounds: a deadline every device meets and a cap of 100
# make it pick 100 like the others. The shared-uplink variant runs the
# paper's greedy loop (one numpy pass per picked device).
OVERRIDES: dict[str, dict[str, object]] = {
    "fedcs": {"deadline_s": 1e9, "max_clients": PER_ROUND, "request_fraction": 1.0},
    "fedcs_shared": {
        "deadline_s": 1e9,
        "max_clients": PER_ROUND,
        "request_fraction": 1.0,
        "shared_uplink": True,
    },
}


def strategies() -> dict[str, SelectionStrategy]:
    """Every fedbench/conf/strategy option at 100 per round, plus FedCS's shared-uplink variant."""
    folder = conf_dir() / "strategy"
    configs = {p.stem: p for p in sorted(folder.glob("*.yaml"))}
    configs["fedcs_shared"] = folder / "fedcs.yaml"
    built: dict[str, SelectionStrategy] = {}
    for name, path in configs.items():
        cfg = OmegaConf.load(path)
        assert isinstance(cfg, DictConfig), path
        cfg.seed = 0
        cfg.clients_per_round = PER_ROUND
        for key, value in OVERRIDES.get(name, {}).items():
            cfg[key] = value
        built[name] = instantiate(cfg)
    return built


def fleet(n: int) -> Fleet:
    phones = yaml.safe_load((conf_dir() / "fleet" / "phones_100.yaml").read_text())
    return expand_fleet({"devices": phones["devices"], "scale": n})


def fabricated_ledger(devices: Fleet, seed: int) -> Ledger:
    rng = np.random.default_rng(seed)
    n = len(devices)
    ledger = Ledger(devices)
    ledger.pred_latency_s[:] = rng.lognormal(np.log(60.0), 0.6, n)
    ledger.pred_comm_s[:] = rng.uniform(2.0, 20.0, n)
    ledger.pred_energy_j[:] = ledger.pred_latency_s * rng.uniform(2.0, 5.0, n)
    ledger.pred_peak_mem_mb[:] = rng.uniform(300.0, 2500.0, n)
    ledger.mem_budget_mb[:] = rng.choice([1500.0, 2500.0, 4000.0], n)
    ledger.throttle_temp_c[:] = 65.0
    ledger.available[:] = rng.random(n) < 0.8
    seen = rng.random(n) < 0.5
    k = int(seen.sum())
    ledger.selected[seen] = rng.integers(1, 5, k)
    ledger.participation[seen] = ledger.selected[seen]
    ledger.last_round[seen] = rng.integers(1, 10, k)
    ledger.last_status[seen] = 0
    ledger.train_loss[seen] = rng.uniform(0.1, 3.0, k)
    ledger.num_examples[seen] = rng.integers(20, 500, k)
    ledger.utility[seen] = ledger.num_examples[seen] * ledger.train_loss[seen]
    ledger.latency_s[seen] = ledger.pred_latency_s[seen]
    ledger.round_trip_s[seen] = ledger.latency_s[seen] + ledger.pred_comm_s[seen]
    ledger.energy_j[seen] = ledger.pred_energy_j[seen]
    ledger.temp_c[seen] = rng.uniform(30.0, 70.0, k)
    ledger.battery_pct[seen] = rng.uniform(5.0, 100.0, k)
    ledger.state_time_s[seen] = 0.0
    return ledger


def reports(
    ledger: Ledger, chosen: np.ndarray, server_round: int, rng: np.random.Generator
) -> list[RoundReport]:
    out = []
    for i in chosen.tolist():
        d = ledger.devices[i]
        latency = float(rng.uniform(10.0, 200.0))
        out.append(
            RoundReport(
                round=server_round,
                day=server_round,
                node=i,
                device=d.name,
                profile=d.profile,
                kind="emulated",
                status="ok" if rng.random() < 0.9 else "dropped",
                num_examples=int(rng.integers(20, 500)),
                train_loss=float(rng.uniform(0.1, 3.0)),
                latency_s=latency,
                comm_s=5.0,
                round_trip_s=latency + 5.0,
                energy_j=latency * 3.0,
                avg_power_w=3.0,
                peak_mem_mb=800.0,
                mem_budget_mb=2500.0,
                plan="bs32",
                temp_c_start=35.0,
                temp_c_end=float(rng.uniform(35.0, 70.0)),
                battery_pct=float(rng.uniform(20.0, 100.0)),
            )
        )
    return out


def time_strategy(
    strategy: SelectionStrategy, devices: Fleet, rounds: int
) -> tuple[float, float, int]:
    """Median select() and record() seconds, and the devices picked in the last round."""
    ledger = fabricated_ledger(devices, seed=1)
    index_of = fleet_index(devices)
    rng = np.random.default_rng(2)
    select_s, record_s = [], []
    picked = 0
    for r in range(10, 10 + rounds):
        t0 = time.perf_counter()
        chosen = strategy.select(ledger, r, 3600.0 * r)
        t1 = time.perf_counter()
        batch = reports(ledger, chosen, r, rng)  # building them is the clients' work
        t2 = time.perf_counter()
        ledger.record(batch, index_of)
        t3 = time.perf_counter()
        select_s.append(t1 - t0)
        record_s.append(t3 - t2)
        picked = len(chosen)
    return statistics.median(select_s), statistics.median(record_s), picked


def ledger_memory(devices: Fleet) -> tuple[float, float, float]:
    """Bytes per device: array nbytes (+ plan pointers), tracemalloc of Ledger, of the fleet."""
    n = len(devices)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    ledger = Ledger(devices)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    arrays = sum(v.nbytes for v in vars(ledger).values() if isinstance(v, np.ndarray))
    arrays += 8 * len(ledger.plan)  # one pointer per device; all share the "" string
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    again = fleet(n)
    fleet_grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del again
    return arrays / n, grown / n, fleet_grown / n


GRAMMAR = Grammar(
    "python benchmarks/selection.py",
    __doc__.splitlines()[0],
    (
        Key("sizes", "fleet sizes, comma-separated", "1000,10000,100000"),
        Key("rounds", "timed rounds (the median is printed)", "10"),
    ),
    ("python benchmarks/selection.py", "python benchmarks/selection.py sizes=1000 rounds=5"),
)


def run(o: dict[str, str]) -> None:
    sizes, rounds = parse_ints("sizes", o["sizes"], 1), parse_int("rounds", o["rounds"], 1)
    print(f"{PER_ROUND} devices per round, median of {rounds} rounds (seconds)\n")
    print(f"{'devices':>8} {'strategy':<16} {'select':>8} {'record':>8} {'total':>8} {'picked':>6}")
    worst: dict[int, float] = {}
    for n in sizes:
        devices = fleet(n)
        for name, strategy in strategies().items():
            sel, rec, picked = time_strategy(strategy, devices, rounds)
            worst[n] = max(worst.get(n, 0.0), sel + rec)
            print(f"{n:>8} {name:<16} {sel:8.4f} {rec:8.4f} {sel + rec:8.4f} {picked:>6}")
    print("\nledger memory per device (bytes)")
    print(f"{'devices':>8} {'arrays':>8} {'traced':>8} {'fleet specs':>12}")
    for n in sizes:
        arrays, traced, specs = ledger_memory(fleet(n))
        print(f"{n:>8} {arrays:8.1f} {traced:8.1f} {specs:12.1f}")
    print()
    for n, seconds in worst.items():
        verdict = "ok" if seconds < 0.5 else "OVER the 0.5 s target"
        print(f"slowest round at {n} devices: {seconds:.4f} s ({verdict})")


if __name__ == "__main__":
    sys.exit(script(GRAMMAR, run))
