"""EAFL: energy-aware selection (Arouj & Abdelmoniem, "Towards Energy-Aware
Federated Learning on Battery-Powered Clients", FedEdge@MobiCom'22), after
the authors' code (SAYED-Sys-Lab/EAFL: Oort's selector in FedScale with a
new reward).

Selection signal: Oort's (strategies/oort.py) with the statistical utility
replaced by a blend of utility and remaining battery, so battery-rich devices
carry the training and nearly-empty ones are spared before they drop out.
Clients must send nothing beyond the standard RoundReport (num_examples,
train_loss, round_trip_s, battery_pct).

The reward of a device that has trained, with U_i its Oort utility and b_i
its remaining battery in [0, 1] (last report, or the population's battery on
the clock):

    reward_i = f * min(U_i / U_clip, 1) + (1 - f) * b_i

(f = `utility_weight`, the paper's weighting factor; U_clip the
`clip_percentile` of the fleet's known utilities). Oort then scores the
reward as it scores its utility: clipped and normalised, plus the staleness
bonus, times the system penalty (T / t_i)^alpha - a full battery does not
rescue a device too slow for the round. The pacer, the exploration decay,
the exploit/explore split, the blacklist and the sampling are Oort's.
Never-picked devices are explored by f * speed_i + (1 - f) * b_i, speed_i
being Oort's exploration weight (the (T / t)^alpha penalty from the
predicted round time).

A device with no battery figure (mains-powered board, or not yet reported)
counts as full, b_i = 1: mains power is the energy a battery-powered fleet
lacks. A device the server predicts cannot finish a round at all (infinite
predicted time: a round needs more energy than its full battery holds) is
never picked: the authors' simulator drops a client whose battery cannot last
the round. `battery_floor_pct` (off by default) also skips devices below a
battery level.

Differences from the paper and the authors' code, and why:

- Units: the authors add f x U_i (samples x loss) to (1 - f) x the remaining
  battery in joules, so at f = 0.75 the battery term outweighs the utility
  by orders of magnitude and the blend depends on the units. fedbench scales
  both terms to [0, 1] first (utility / U_clip, battery as a fraction of its
  capacity, which is what the server knows), so f is the utility's share the
  paper's formula describes.
- Exploration: the authors rank never-picked clients by data size x system
  penalty, as Oort; fedbench knows every device's battery before it trains
  (the population's clock) and blends it in exploration too, so the battery
  term acts from round 1 (f = 1: Oort's exploration by speed).
- Dropping out is the environment's (a device whose battery runs out during
  a round drops out, the population makes an empty one unavailable), not
  the selector's; the selector only skips the predicted-infinite devices and
  those under `battery_floor_pct` (a fedbench option, 0: the paper's rule).
- Everything Oort's module lists (strategies/oort.py) holds here too.
  The authors' defaults are FedScale's, except f = 0.75 (`scal_val`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbench.ledger import Ledger
from strategies.common import check_number, round_time_s
from strategies.oort import Oort, OortParams


@dataclass(frozen=True)
class EAFLParams(OortParams):
    """Oort's knobs and defaults plus EAFL's two."""

    utility_weight: float = 0.75  # f, the authors' `scal_val`
    battery_floor_pct: float = 0.0  # fedbench's option; 0: none, as in the paper

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("utility_weight", self.utility_weight, 0.0, 1.0)
        check_number("battery_floor_pct", self.battery_floor_pct, 0.0, 100.0, meaning="percent")


_P = EAFLParams  # the defaults below are read from here


class EAFL(Oort):
    params: EAFLParams

    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        utility_weight: float = _P.utility_weight,
        battery_floor_pct: float = _P.battery_floor_pct,
        exploration: float = _P.exploration,
        exploration_decay: float = _P.exploration_decay,
        exploration_min: float = _P.exploration_min,
        alpha: float = _P.alpha,
        round_threshold: float = _P.round_threshold,
        clip_percentile: float = _P.clip_percentile,
        cut_off: float = _P.cut_off,
        sample_window: float = _P.sample_window,
        pacer_step: int | None = _P.pacer_step,
        pacer_delta: float = _P.pacer_delta,
        blacklist_rounds: int | None = _P.blacklist_rounds,
        blacklist_max_len: float = _P.blacklist_max_len,
    ) -> None:
        # SelectionStrategy's checks, then Oort's state from EAFL's own parameters
        # (Oort.__init__ would build and check an OortParams only to replace it).
        super(Oort, self).__init__(clients_per_round, seed, overcommit)
        self.start(
            EAFLParams(
                exploration=exploration,
                exploration_decay=exploration_decay,
                exploration_min=exploration_min,
                alpha=alpha,
                round_threshold=round_threshold,
                clip_percentile=clip_percentile,
                cut_off=cut_off,
                sample_window=sample_window,
                pacer_step=pacer_step,
                pacer_delta=pacer_delta,
                blacklist_rounds=blacklist_rounds,
                blacklist_max_len=blacklist_max_len,
                utility_weight=utility_weight,
                battery_floor_pct=battery_floor_pct,
            )
        )

    def eligible(self, ledger: Ledger, now_s: float) -> np.ndarray:
        idx = super().eligible(ledger, now_s)
        # NaN (no battery) compares False: mains-powered devices stay eligible.
        low = ledger.battery_pct[idx] < self.params.battery_floor_pct
        return idx[~low & ~np.isposinf(round_time_s(ledger, idx))]

    def battery(self, ledger: Ledger, idx: np.ndarray) -> np.ndarray:
        """b_i in [0, 1]; 1 where the device reported no battery."""
        return np.clip(np.nan_to_num(ledger.battery_pct[idx] / 100.0, nan=1.0), 0.0, 1.0)

    def statistical_utility(self, ledger: Ledger, idx: np.ndarray) -> np.ndarray:
        """The reward: f x utility / U_clip + (1 - f) x battery; NaN where no utility yet."""
        fleet = ledger.utility[np.isfinite(ledger.utility) & (ledger.utility > 0)]
        # The fleet's clip value, not that of `idx`: the pacer asks about a few devices
        # and must see their reward on the same scale as the round that picked them.
        clip = float(np.percentile(fleet, self.params.clip_percentile)) if len(fleet) else 1.0
        u = ledger.utility[idx]
        w = self.params.utility_weight
        reward = w * np.minimum(u / max(clip, 1e-12), 1.0) + (1.0 - w) * self.battery(ledger, idx)
        return np.where(np.isfinite(u) & (u > 0), reward, np.nan)

    def explore_weights(self, ledger: Ledger, idx: np.ndarray, preferred: float) -> np.ndarray:
        speed = super().explore_weights(ledger, idx, preferred)
        w = self.params.utility_weight
        return w * speed + (1.0 - w) * self.battery(ledger, idx)
