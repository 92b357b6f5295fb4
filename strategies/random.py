"""Uniform random selection: the baseline of every FL paper (FedAvg, McMahan et al. 2017).

Selection signal: none - `clients_per_round` devices uniformly at random
among the available ones, from a seeded generator. Clients must send
nothing beyond the standard RoundReport.
"""

from __future__ import annotations

import numpy as np

from fedbench.ledger import Ledger
from strategies.base import SelectionStrategy


class RandomSelection(SelectionStrategy):
    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        return self.rng.choice(eligible, size=k, replace=False)
