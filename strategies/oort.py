"""Oort: guided participant selection (Lai et al., OSDI'21, "Oort: Efficient
Federated Learning via Guided Participant Selection"), after the authors'
FedScale implementation.

Selection signal: statistical utility U_i = |B_i| * loss (the ledger's
`utility`), times a system penalty (T / t_i)^alpha for devices whose expected
round time t_i exceeds the preferred duration T, plus a staleness bonus
sqrt(0.1 ln(round) / last_round_i). Clients must send nothing beyond the
standard RoundReport (num_examples, train_loss, round_trip_s).

Per round, with exploration factor e (starts at `exploration`, multiplied by
`exploration_decay` every round down to `exploration_min`):

- exploitation, (1 - e) * k devices among those picked before: the score
  S_i = ((min(U_i, clip) - U_min) / (clip - U_min) + staleness_i) * penalty_i,
  with `clip` the `clip_percentile` of the known utilities (outliers - a
  device with a corrupt huge loss - must not take every round). Devices with
  S_i >= `cut_off` x the k-th best score, and at least 10x as many as needed
  (FedScale), are sampled without replacement with probability ~ S_i;
- exploration, the rest, among devices never picked: without a utility yet,
  they are ranked by speed alone, penalty_i from the measured or predicted
  round time, and sampled ~ penalty_i from the `sample_window` x needed best.

T is the `round_threshold` percentile of the expected round times of the
fleet (measured, else the profile's prediction; 100 = no penalty). The
optional pacer (`pacer_step` rounds) compares the summed utility of the
last two windows: if it stalled (changed by <= 10%) it relaxes T by
`pacer_delta` percentile points so slower, unexplored-utility devices get in;
if it swung by >= 5x it tightens T again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbench.ledger import STATUS_CODE, Ledger
from strategies.base import SelectionStrategy
from strategies.common import (
    check_number,
    round_time_s,
    staleness_bonus,
    top_k,
    weighted_sample,
)


@dataclass(frozen=True)
class OortParams:
    exploration: float = 0.9
    exploration_decay: float = 0.98
    exploration_min: float = 0.3
    alpha: float = 2.0
    round_threshold: float = 30.0
    clip_percentile: float = 98.0
    cut_off: float = 0.95
    sample_window: float = 5.0
    pacer_step: int | None = 20
    pacer_delta: float = 5.0

    def __post_init__(self) -> None:
        check_number("exploration", self.exploration, 0.0, 1.0)
        check_number("exploration_decay", self.exploration_decay, 0.0, 1.0)
        check_number("exploration_min", self.exploration_min, 0.0, self.exploration)
        check_number("alpha", self.alpha, 0.0, 100.0, meaning="system penalty exponent")
        check_number("round_threshold", self.round_threshold, 0.0, 100.0, meaning="percentile")
        check_number("clip_percentile", self.clip_percentile, 0.0, 100.0)
        check_number("cut_off", self.cut_off, 0.0, 1.0)
        check_number("sample_window", self.sample_window, 1.0, 1e6)
        if self.pacer_step is not None:
            check_number("pacer_step", self.pacer_step, 1, 1e9, integer=True, meaning="or null")
        check_number("pacer_delta", self.pacer_delta, 0.0, 100.0)


class Oort(SelectionStrategy):
    signals = ("train_loss",)  # its statistical utility: the loss the app reports

    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        exploration: float = 0.9,
        exploration_decay: float = 0.98,
        exploration_min: float = 0.3,
        alpha: float = 2.0,
        round_threshold: float = 30.0,
        clip_percentile: float = 98.0,
        cut_off: float = 0.95,
        sample_window: float = 5.0,
        pacer_step: int | None = 20,
        pacer_delta: float = 5.0,
    ) -> None:
        super().__init__(clients_per_round, seed, overcommit)
        self.params = OortParams(
            exploration,
            exploration_decay,
            exploration_min,
            alpha,
            round_threshold,
            clip_percentile,
            cut_off,
            sample_window,
            pacer_step,
            pacer_delta,
        )
        self.exploration = float(exploration)
        self.round_threshold = float(round_threshold)
        self.util_history: list[float] = []  # summed utility per round, last 2 pacer windows

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        self._pace(ledger, server_round)
        preferred = self._preferred_duration(ledger)
        p = self.params
        self.exploration = max(self.exploration * p.exploration_decay, p.exploration_min)
        seen = ledger.selected[eligible] > 0
        explored, unexplored = eligible[seen], eligible[~seen]
        n_explore = min(len(unexplored), k - min(int(k * (1.0 - self.exploration)), len(explored)))
        n_exploit = min(k - n_explore, len(explored))
        exploit = self._exploit(ledger, explored, n_exploit, server_round, preferred)
        weights = self.explore_weights(ledger, unexplored, preferred)
        window = top_k(weights, int(np.ceil(p.sample_window * n_explore)), self.rng)
        explore = window[weighted_sample(self.rng, weights[window], n_explore)]
        return np.concatenate([exploit, unexplored[explore]])

    def penalty(self, ledger: Ledger, idx: np.ndarray, preferred: float) -> np.ndarray:
        """(T / t)^alpha where the expected round time t exceeds T, else 1 (also if t unknown)."""
        t = round_time_s(ledger, idx)
        slow = t > preferred
        out = np.ones(len(idx))
        out[slow] = (preferred / t[slow]) ** self.params.alpha
        return out

    def exploit_scores(
        self, ledger: Ledger, idx: np.ndarray, server_round: int, preferred: float
    ) -> np.ndarray:
        """Oort's S_i for devices picked before (non-negative)."""
        u = ledger.utility[idx]
        known = np.isfinite(u) & (u > 0)
        norm = np.zeros(len(idx))
        if known.any():
            clip = float(np.percentile(u[known], self.params.clip_percentile))
            low = float(u[known].min()) * 0.999
            norm[known] = (np.minimum(u[known], clip) - low) / max(clip - low, 1e-4)
        score = norm + staleness_bonus(ledger, idx, server_round)
        return score * self.penalty(ledger, idx, preferred)

    def explore_weights(self, ledger: Ledger, idx: np.ndarray, preferred: float) -> np.ndarray:
        """Never-picked devices have no utility yet: rank them by (predicted) speed."""
        return self.penalty(ledger, idx, preferred)

    def _exploit(
        self, ledger: Ledger, idx: np.ndarray, n: int, server_round: int, preferred: float
    ) -> np.ndarray:
        if n == 0:
            return np.empty(0, dtype=np.int64)
        scores = self.exploit_scores(ledger, idx, server_round, preferred)
        order = top_k(scores, n, self.rng)
        cut = scores[order[-1]] * self.params.cut_off
        pool = max(int((scores >= cut).sum()), 10 * n + 1)
        candidates = top_k(scores, pool, self.rng)
        return idx[candidates[weighted_sample(self.rng, scores[candidates], n)]]

    def _preferred_duration(self, ledger: Ledger) -> float:
        if self.round_threshold >= 100.0:
            return float("inf")
        t = round_time_s(ledger, np.arange(len(ledger)))
        t = t[np.isfinite(t)]
        return float(np.percentile(t, self.round_threshold)) if len(t) else float("inf")

    def _pace(self, ledger: Ledger, server_round: int) -> None:
        step = self.params.pacer_step
        if step is None or server_round < 2:  # nothing trained before round 1
            return
        last = (ledger.last_round == server_round - 1) & (ledger.last_status == STATUS_CODE["ok"])
        self.util_history.append(float(np.nansum(ledger.utility[last])))
        del self.util_history[: -2 * step]
        if len(self.util_history) < 2 * step or server_round % step:
            return
        before, now = sum(self.util_history[:step]), sum(self.util_history[step:])
        delta = self.params.pacer_delta
        if abs(now - before) <= 0.1 * before:
            self.round_threshold = min(100.0, self.round_threshold + delta)
        elif abs(now - before) >= 5.0 * before:
            self.round_threshold = max(delta, self.round_threshold - delta)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "exploration": self.exploration,
            "round_threshold": self.round_threshold,
            "util_history": list(self.util_history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.exploration = float(state["exploration"])
        self.round_threshold = float(state["round_threshold"])
        self.util_history = [float(x) for x in state["util_history"]]
