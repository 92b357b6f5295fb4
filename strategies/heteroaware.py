"""Heterogeneity-aware selection: fedbench's own, using every measured and
predicted figure the ledger holds.

Selection signal: expected statistical utility per joule within a round
deadline. Clients must send nothing beyond the standard RoundReport
(num_examples, train_loss, latency_s, round_trip_s, energy_j, temp_c_end,
battery_pct, status); the server's profile predictions cover devices that
have not reported yet.

Never picked: unavailable devices, devices predicted to run out of memory
(base rule) or whose last round ended `oom` (the workload does not change,
so neither would the outcome), devices with battery below
`battery_floor_pct`, and devices expected to miss `deadline_s`.

Per device i, every term explainable from one ledger column:

- time t_i and energy e_i of one round: last measured, else the profile's
  prediction;
- thermal: the temperature now, T_i = ambient + (temp_c_i - ambient) *
  exp(-(now - state_time_i) / `cooling_tau_s`) (cooling while idle), sets
  heat_i = clip((T_i - (throttle_temp_c_i - `throttle_margin_c`)) /
  throttle_margin_c, 0, 1): 0 well below the first trip point, 1 at it. A
  hot device will throttle next round, so t_i and e_i are inflated by
  slow_i = 1 + (`throttle_slowdown` - 1) * heat_i (longer at a lower clock,
  burning the idle and memory power for longer);
- cost_i = (e_i * slow_i / median e) * (1 + `battery_weight` * (1 - b_i)),
  b_i the battery fraction (1 without a battery): a joule from a nearly
  empty phone costs more than one from a full or mains-powered device.
  Devices with no energy figure (host devices) are costed by their time
  relative to the median time instead, and by 1 if that is unknown too;
- stat_i = min(U_i, clip) / clip + sqrt(0.1 ln(round) / last_round_i):
  Oort's statistical utility U_i = |B_i| * loss normalised at the
  `clip_percentile`, plus Oort's staleness bonus so utilities that were
  measured long ago get refreshed;
- reliability_i = (ok rounds + 1) / (picked rounds + 2): the share of past
  rounds that delivered an update (Laplace-smoothed);

score_i = reliability_i * stat_i / cost_i. The best-scoring devices picked
before fill k - n_explore places (ties broken at random); n_explore =
ceil(`explore_fraction` * k) places go to never-picked devices, drawn with
probability ~ 1 / cost_i (cheap-looking ones first, by their prediction),
and all places do once no device has been picked yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbench.ledger import STATUS_CODE, Ledger
from strategies.base import SelectionStrategy
from strategies.common import (
    check_number,
    energy_j,
    round_time_s,
    staleness_bonus,
    top_k,
    weighted_sample,
)


@dataclass(frozen=True)
class HeteroParams:
    deadline_s: float | None = None
    explore_fraction: float = 0.2
    battery_floor_pct: float = 15.0
    battery_weight: float = 1.0
    throttle_margin_c: float = 5.0
    throttle_slowdown: float = 1.5
    ambient_c: float = 25.0
    cooling_tau_s: float = 300.0
    clip_percentile: float = 95.0

    def __post_init__(self) -> None:
        if self.deadline_s is not None:
            check_number("deadline_s", self.deadline_s, 0.0, math.inf, meaning="seconds or null")
        check_number("explore_fraction", self.explore_fraction, 0.0, 1.0)
        check_number("battery_floor_pct", self.battery_floor_pct, 0.0, 100.0)
        check_number("battery_weight", self.battery_weight, 0.0, 1e6)
        check_number("throttle_margin_c", self.throttle_margin_c, 0.01, 100.0)
        check_number("throttle_slowdown", self.throttle_slowdown, 1.0, 100.0)
        check_number("ambient_c", self.ambient_c, -50.0, 100.0)
        check_number("cooling_tau_s", self.cooling_tau_s, 0.001, 1e9)
        check_number("clip_percentile", self.clip_percentile, 0.0, 100.0)


class HeteroAware(SelectionStrategy):
    signals = ("train_loss",)  # its statistical utility: the loss the app reports

    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        deadline_s: float | None = None,
        explore_fraction: float = 0.2,
        battery_floor_pct: float = 15.0,
        battery_weight: float = 1.0,
        throttle_margin_c: float = 5.0,
        throttle_slowdown: float = 1.5,
        ambient_c: float = 25.0,
        cooling_tau_s: float = 300.0,
        clip_percentile: float = 95.0,
    ) -> None:
        super().__init__(clients_per_round, seed, overcommit)
        self.params = HeteroParams(
            deadline_s,
            explore_fraction,
            battery_floor_pct,
            battery_weight,
            throttle_margin_c,
            throttle_slowdown,
            ambient_c,
            cooling_tau_s,
            clip_percentile,
        )

    def eligible(self, ledger: Ledger, now_s: float) -> np.ndarray:
        idx = super().eligible(ledger, now_s)
        p = self.params
        keep = ledger.last_status[idx] != STATUS_CODE["oom"]
        keep &= ~(ledger.battery_pct[idx] < p.battery_floor_pct)  # NaN: no battery, kept
        if p.deadline_s is not None:
            late = round_time_s(ledger, idx) * self.slowdown(ledger, idx, now_s) > p.deadline_s
            keep &= ~late  # NaN: time unknown, kept so it gets measured
        return idx[keep]

    def slowdown(self, ledger: Ledger, idx: np.ndarray, now_s: float) -> np.ndarray:
        """slow_i: 1 for a cool device, up to throttle_slowdown at its first trip point."""
        p = self.params
        since = np.maximum(now_s - ledger.state_time_s[idx], 0.0)
        cooled = np.exp(-np.nan_to_num(since, nan=0.0) / p.cooling_tau_s)
        temp = p.ambient_c + (ledger.temp_c[idx] - p.ambient_c) * cooled
        start = ledger.throttle_temp_c[idx] - p.throttle_margin_c
        heat = np.clip(np.nan_to_num((temp - start) / p.throttle_margin_c, nan=0.0), 0.0, 1.0)
        return 1.0 + (p.throttle_slowdown - 1.0) * heat

    def cost(self, ledger: Ledger, idx: np.ndarray, now_s: float) -> np.ndarray:
        """cost_i: relative energy (else relative time, else 1), battery-weighted."""
        slow = self.slowdown(ledger, idx, now_s)
        cost = np.ones(len(idx))
        filled = np.zeros(len(idx), dtype=bool)
        for figure in (energy_j(ledger, idx) * slow, round_time_s(ledger, idx) * slow):
            # inf (the profile predicts the round cannot finish) stays inf: score 0.
            usable = ~filled & ~np.isnan(figure) & (figure > 0)
            finite = usable & np.isfinite(figure)
            if usable.any():
                median = float(np.median(figure[finite])) if finite.any() else 1.0
                cost[usable] = figure[usable] / median
                filled |= usable
        battery = np.clip(np.nan_to_num(ledger.battery_pct[idx] / 100.0, nan=1.0), 0.0, 1.0)
        return cost * (1.0 + self.params.battery_weight * (1.0 - battery))

    def scores(
        self, ledger: Ledger, idx: np.ndarray, server_round: int, now_s: float
    ) -> np.ndarray:
        """score_i = reliability_i * stat_i / cost_i (see the module docstring)."""
        u = ledger.utility[idx]
        known = np.isfinite(u) & (u > 0)
        stat = np.zeros(len(idx))
        if known.any():
            clip = max(float(np.percentile(u[known], self.params.clip_percentile)), 1e-12)
            stat[known] = np.minimum(u[known], clip) / clip
        stat += staleness_bonus(ledger, idx, server_round)
        reliability = (ledger.participation[idx] + 1.0) / (ledger.selected[idx] + 2.0)
        return reliability * stat / self.cost(ledger, idx, now_s)

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        seen = ledger.selected[eligible] > 0
        explored, unexplored = eligible[seen], eligible[~seen]
        n_explore = min(len(unexplored), math.ceil(self.params.explore_fraction * k))
        n_explore = max(n_explore, k - len(explored))
        n_exploit = k - n_explore
        best = top_k(self.scores(ledger, explored, server_round, now_s), n_exploit, self.rng)
        cheap = 1.0 / self.cost(ledger, unexplored, now_s)
        tried = weighted_sample(self.rng, cheap, n_explore)
        return np.concatenate([explored[best], unexplored[tried]])
