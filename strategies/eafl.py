"""EAFL: energy-aware selection (Arouj & Abdelmoniem, "Towards Energy-Aware
Federated Learning on Battery-Powered Clients", FedEdge@MobiCom'22).

Selection signal: Oort's score (statistical utility, system penalty,
staleness; see strategies/oort.py) blended with the device's battery level,
so battery-rich devices carry the training and nearly-empty ones are spared
before they drop out. Clients must send nothing beyond the standard
RoundReport (num_examples, train_loss, round_trip_s, battery_pct).

Score of a device picked before, with S_i its Oort score and b_i its last
reported battery level in [0, 1]:

    EAFL_i = w * S_i / max_j S_j + (1 - w) * b_i

(w = `utility_weight`; the paper's linear blend of normalised Oort utility
and remaining battery). Never-picked devices are explored by
w * speed_i + (1 - w) * b_i, speed_i being Oort's exploration weight (the
(T/t)^alpha penalty from the predicted round time). Exploration, decay,
the exploit/explore split and sampling are Oort's.

A device whose battery is below `battery_floor_pct` is never picked: one
more round could empty it and it would drop out mid-round. A device with no
battery figure (mains-powered board, or not yet reported) counts as full,
b_i = 1: mains power is the energy a battery-powered fleet lacks. Nor is a
device the server predicts cannot finish a round at all (infinite predicted
time: a round needs more energy than its full battery holds) - the blend
would otherwise let a full battery outweigh a zero Oort score.
"""

from __future__ import annotations

import numpy as np

from fedbench.ledger import Ledger
from strategies.common import check_number, round_time_s
from strategies.oort import Oort


class EAFL(Oort):
    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        utility_weight: float = 0.5,
        battery_floor_pct: float = 20.0,
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
        super().__init__(
            clients_per_round,
            seed,
            overcommit,
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
        self.utility_weight = check_number("utility_weight", utility_weight, 0.0, 1.0)
        self.battery_floor_pct = check_number(
            "battery_floor_pct", battery_floor_pct, 0.0, 100.0, meaning="percent"
        )

    def eligible(self, ledger: Ledger, now_s: float) -> np.ndarray:
        idx = super().eligible(ledger, now_s)
        # NaN (no battery) compares False: mains-powered devices stay eligible.
        low = ledger.battery_pct[idx] < self.battery_floor_pct
        return idx[~low & ~np.isposinf(round_time_s(ledger, idx))]

    def battery(self, ledger: Ledger, idx: np.ndarray) -> np.ndarray:
        """b_i in [0, 1]; 1 where the device reported no battery."""
        return np.clip(np.nan_to_num(ledger.battery_pct[idx] / 100.0, nan=1.0), 0.0, 1.0)

    def exploit_scores(
        self, ledger: Ledger, idx: np.ndarray, server_round: int, preferred: float
    ) -> np.ndarray:
        oort = super().exploit_scores(ledger, idx, server_round, preferred)
        top = float(oort.max()) if len(oort) else 0.0
        norm = oort / top if top > 0 else np.zeros(len(idx))
        w = self.utility_weight
        return w * norm + (1.0 - w) * self.battery(ledger, idx)

    def explore_weights(self, ledger: Ledger, idx: np.ndarray, preferred: float) -> np.ndarray:
        speed = super().explore_weights(ledger, idx, preferred)
        w = self.utility_weight
        return w * speed + (1.0 - w) * self.battery(ledger, idx)
