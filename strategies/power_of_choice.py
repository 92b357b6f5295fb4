"""Power-of-choice (Cho, Wang & Joshi, AISTATS'22, "Towards Understanding
Biased Client Selection in Federated Learning"), its rpow-d variant.

Selection signal: last local training loss. Each round, d = ceil(
`candidate_factor` x k) candidates are drawn without replacement with
probability proportional to their data size |B_i| (the ledger's
`num_examples`; devices that never reported get the mean known size), and
the k candidates with the highest loss train. Biasing towards high loss
speeds up convergence; d trades that bias (large d) against fairness (d = k
is plain size-weighted sampling). Clients must send nothing beyond the
standard RoundReport (num_examples, train_loss).

The paper's pow-d asks every candidate for its loss on the current global
model, an extra round trip; rpow-d, used here, reuses the loss a device
reported when it last trained, so selection costs no communication. A
device that was never picked has loss +inf: it is tried as soon as it
becomes a candidate, which also gives it a size and a loss. A device that was
picked but never finished a round (it always misses the deadline or fails)
has loss -inf: it trains only when no other candidate is left.
"""

from __future__ import annotations

import math

import numpy as np

from fedbench.ledger import Ledger
from strategies.base import SelectionStrategy
from strategies.common import check_number, top_k, weighted_sample


class PowerOfChoice(SelectionStrategy):
    signals = ("train_loss",)  # its statistical utility: the loss the app reports

    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        candidate_factor: float = 3.0,
    ) -> None:
        super().__init__(clients_per_round, seed, overcommit)
        self.candidate_factor = check_number(
            "candidate_factor", candidate_factor, 1.0, 1e6, meaning="d = factor x k candidates"
        )

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        d = math.ceil(round(self.candidate_factor * k, 9))
        size = ledger.num_examples[eligible]
        known = np.isfinite(size) & (size > 0)
        fill = float(size[known].mean()) if known.any() else 1.0
        size = np.where(known, size, fill)
        candidates = eligible[weighted_sample(self.rng, size, d)]
        loss = ledger.train_loss[candidates]
        # No loss yet: never picked -> +inf (try it); picked but never finished
        # (always late or failing) -> -inf, or it would be picked every round.
        tried = ledger.selected[candidates] > 0
        loss = np.where(np.isnan(loss), np.where(tried, -np.inf, np.inf), loss)
        return candidates[top_k(loss, k, self.rng)]
