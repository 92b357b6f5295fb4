"""TiFL: tier-based selection (Chai et al., HPDC'20, "TiFL: A Tier-based
Federated Learning System"), adaptive tier selection.

Selection signal: response latency, for tiers, and the tiers' mean training
loss, for which tier trains. Clients must send nothing beyond the standard
RoundReport (round_trip_s, train_loss).

- Tiers: devices sorted by expected round time (last measured round trip,
  else the profile's prediction) are cut into `num_tiers` equal-size tiers,
  fastest first. Tiers are recomputed every round, so a device moves as its
  measurements arrive (a hot phone that slowed down drops a tier). Devices
  with neither a measurement nor a prediction form one extra "unprofiled"
  tier, TiFL's profiling step done on-line: it is picked like any tier
  until its members have been measured.
- Which tier: drawn with the tier probabilities among tiers that still have
  credits and at least k eligible devices; the chosen tier spends a credit.
  Credits (`credits` per tier) bound how often any one tier - in practice a
  slow one - is picked; once no candidate tier has credits left, all are
  refilled. Probabilities start equal. Every `interval` rounds, if the tier
  trained last has not improved since the previous check (its mean loss did
  not fall; the paper: its accuracy did not rise), they are re-ranked from
  the tiers' mean training loss (ChangeProbs): the tier with the highest
  loss (worst accuracy) gets weight n, the next n - 1, ..., the lowest 1,
  equal losses sharing a weight. A tier whose members never reported a loss
  ranks highest, so it is tried - unless they were picked and never
  finished a round (always past the deadline): then it ranks lowest.
- Within the tier: k eligible members uniformly at random. TiFL assumes
  tiers hold at least k devices; if none does, the k eligible devices whose
  latency rank is nearest the drawn tier's are taken instead.

Differences from the paper, and why:

- A tier's accuracy is the mean of its members' last reported training
  losses (lower loss = higher accuracy): the paper evaluates the global
  model on every tier's test data each round, which needs an evaluation
  round trip to every tier that selection does not have. A tier not trained
  for a while keeps its members' older, higher losses.
- ChangeProbs' weights are n .. 1; the paper's (n - i) / D with
  D = n(n - 1)/2 gives the most accurate tier probability 0. With losses
  standing in for accuracy, a tier starved at 0 would never report again
  and keep its stale rank for good.
- Credits are refilled when spent: the paper sizes them for a fixed round
  budget (its loop would spin once all are spent); fedbench's runs are
  open-ended.
- Profiling is on-line (measured round trips, else the profile's
  prediction) and tiers follow measurements; the paper profiles every
  client for a few rounds before training, and drops clients slower than
  its time-out as dropouts. fedbench keeps predicted-infeasible devices in
  the slowest tier (the round close times them out).
- Tiers smaller than k: the nearest latencies are taken (above).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbench.ledger import Ledger
from strategies.base import SelectionStrategy
from strategies.common import check_number, round_time_s


class TiFL(SelectionStrategy):
    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        num_tiers: int = 5,
        credits: int = 50,
        interval: int = 5,
    ) -> None:
        super().__init__(clients_per_round, seed, overcommit)
        self.num_tiers = int(check_number("num_tiers", num_tiers, 1, 1000, integer=True))
        self.credits_per_tier = int(check_number("credits", credits, 1, 1e9, integer=True))
        self.interval = int(check_number("interval", interval, 1, 1e9, integer=True))
        slots = self.num_tiers + 1  # the last one: unprofiled devices
        self.credits = np.full(slots, self.credits_per_tier, dtype=np.int64)
        self.probs = np.full(slots, 1.0 / slots)
        # The adaptive test: the tier trained last (-1: none yet) and every tier's mean
        # loss at the previous check (+inf before any training: any loss is a fall).
        self.last_tier = -1
        self.checked = np.full(slots, np.inf)

    def tiers(self, ledger: Ledger) -> np.ndarray:
        """Tier of every device: 0 fastest .. num_tiers - 1 slowest, num_tiers unprofiled."""
        t = round_time_s(ledger, np.arange(len(ledger)))
        known = np.flatnonzero(~np.isnan(t))  # inf (predicted infeasible): slowest
        tier = np.full(len(ledger), self.num_tiers, dtype=np.int64)
        order = known[np.argsort(t[known], kind="stable")]
        tier[order] = np.arange(len(order)) * self.num_tiers // max(len(order), 1)
        return tier

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        tier = self.tiers(ledger)
        if server_round % self.interval == 0:
            self._adapt(ledger, tier)
        members = np.bincount(tier[eligible], minlength=self.num_tiers + 1)
        big = members >= k
        if not (big & (self.credits > 0)).any():
            self.credits[:] = self.credits_per_tier
        allowed = (big & (self.credits > 0)) if big.any() else members > 0
        weights = np.where(allowed, self.probs, 0.0)
        # A tier whose probability was ranked to ~0 still beats no tier at all.
        weights = weights if weights.sum() > 0 else allowed.astype(np.float64)
        chosen = int(self.rng.choice(len(weights), p=weights / weights.sum()))
        self.credits[chosen] = max(self.credits[chosen] - 1, 0)  # fallback tiers may have none
        self.last_tier = chosen
        inside = eligible[tier[eligible] == chosen]
        if len(inside) >= k:
            return self.rng.choice(inside, size=k, replace=False)
        return self._nearest(ledger, eligible, tier, chosen, k)

    def _adapt(self, ledger: Ledger, tier: np.ndarray) -> None:
        """The adaptive check: re-rank unless the tier trained last improved since the last."""
        mean = self.tier_loss(ledger, tier)
        last = self.last_tier
        # A tier whose devices never finish (-inf) has not improved, whatever it was.
        improved = last >= 0 and bool(np.isfinite(mean[last]) and mean[last] < self.checked[last])
        self.checked = mean
        if not improved:
            self.probs = self._change_probs(mean, np.bincount(tier, minlength=len(mean)) > 0)

    def tier_loss(self, ledger: Ledger, tier: np.ndarray) -> np.ndarray:
        """Mean last reported loss per tier (+inf: none yet; -inf: picked, never finished)."""
        loss = ledger.train_loss
        known = np.isfinite(loss)
        slots = self.num_tiers + 1
        total = np.bincount(tier[known], weights=loss[known], minlength=slots)
        count = np.bincount(tier[known], minlength=slots)
        # A tier without losses is tried first (+inf) unless its devices were
        # picked and never finished a round (always late or failing): then last.
        tried = np.bincount(tier[ledger.selected > 0], minlength=slots) > 0
        return np.where(count > 0, total / np.maximum(count, 1), np.where(tried, -np.inf, np.inf))

    @staticmethod
    def _change_probs(mean: np.ndarray, present: np.ndarray) -> np.ndarray:
        """ChangeProbs: weight 1 + number of tiers with a strictly lower loss, normalised."""
        lower = (mean[present][None, :] < mean[present][:, None]).sum(axis=1)
        weights = np.zeros(len(mean))
        weights[present] = 1.0 + lower  # equal losses share one weight
        return weights / weights.sum()

    def _nearest(
        self, ledger: Ledger, eligible: np.ndarray, tier: np.ndarray, chosen: int, k: int
    ) -> np.ndarray:
        t = round_time_s(ledger, eligible)
        ranked = eligible[np.argsort(np.where(np.isnan(t), np.inf, t), kind="stable")]
        block = np.flatnonzero(tier[ranked] == chosen)
        centre = int(block.mean()) if len(block) else 0
        start = min(max(centre - k // 2, 0), len(ranked) - k)
        return ranked[start : start + k]

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "credits": self.credits.tolist(),
            "probs": self.probs.tolist(),
            "last_tier": self.last_tier,
            "checked": self.checked.tolist(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.credits = np.asarray(state["credits"], dtype=np.int64)
        self.probs = np.asarray(state["probs"], dtype=np.float64)
        # Absent from checkpoints written before the adaptive check: re-rank at the next.
        self.last_tier = int(state.get("last_tier", -1))
        self.checked = np.asarray(state.get("checked", np.full(len(self.probs), np.inf)))
