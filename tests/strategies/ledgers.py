"""Fabricated ledgers for strategy tests: host devices whose arrays the test fills."""

from __future__ import annotations

import numpy as np

from fedbench.experiment.fleet import expand_fleet
from fedbench.ledger import STATUS_CODE, Ledger


def blank(n: int) -> Ledger:
    return Ledger(expand_fleet({"devices": [{"profile": "host", "count": n}]}))


def trained(
    ledger: Ledger,
    idx: np.ndarray | list[int],
    server_round: int,
    loss: float | np.ndarray = 1.0,
    examples: float | np.ndarray = 100.0,
) -> None:
    """Mark devices as having trained fine in `server_round` with this loss and data size."""
    i = np.asarray(idx)
    ledger.selected[i] += 1
    ledger.participation[i] += 1
    ledger.last_round[i] = server_round
    ledger.last_status[i] = STATUS_CODE["ok"]
    ledger.train_loss[i] = loss
    ledger.num_examples[i] = examples
    ledger.utility[i] = ledger.num_examples[i] * np.abs(ledger.train_loss[i])


def mixed(n: int = 60, seed: int = 0) -> Ledger:
    """A heterogeneous fleet: predictions for all, two thirds measured, some unavailable."""
    rng = np.random.default_rng(seed)
    ledger = blank(n)
    ledger.pred_latency_s[:] = rng.uniform(10, 100, n)
    ledger.pred_comm_s[:] = rng.uniform(1, 5, n)
    ledger.pred_energy_j[:] = rng.uniform(50, 500, n)
    ledger.pred_peak_mem_mb[:] = rng.uniform(200, 900, n)
    ledger.mem_budget_mb[:] = 1000.0
    ledger.throttle_temp_c[:] = 70.0
    seen = np.flatnonzero(np.arange(n) % 3 != 0)
    trained(ledger, seen, 1, rng.uniform(0.1, 3.0, len(seen)), rng.integers(20, 200, len(seen)))
    ledger.latency_s[seen] = ledger.pred_latency_s[seen] * rng.uniform(0.8, 1.2, len(seen))
    ledger.round_trip_s[seen] = ledger.latency_s[seen] + ledger.pred_comm_s[seen]
    ledger.energy_j[seen] = ledger.pred_energy_j[seen]
    ledger.temp_c[seen] = rng.uniform(30, 60, len(seen))
    ledger.state_time_s[seen] = 0.0
    ledger.battery_pct[seen] = rng.uniform(30, 100, len(seen))
    ledger.available[rng.choice(n, n // 6, replace=False)] = False
    ledger.pred_peak_mem_mb[[1, 3]] = 1500.0  # predicted to run out of memory
    return ledger
