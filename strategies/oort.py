"""Oort: guided participant selection (Lai et al., OSDI'21, "Oort: Efficient
Federated Learning via Guided Participant Selection"), after the authors'
selector in FedScale (SymbioticLab/FedScale, thirdparty/oort/oort.py).

Selection signal: statistical utility U_i = |B_i| * loss (the ledger's
`utility`), times a system penalty (T / t_i)^alpha for devices whose expected
round time t_i exceeds the preferred duration T, plus a staleness bonus
sqrt(0.1 ln(round) / last_round_i). Clients must send nothing beyond the
standard RoundReport (num_examples, train_loss, round_trip_s).

Per round, with exploration factor e (starts at `exploration`, multiplied by
`exploration_decay` every round down to `exploration_min`), floor(e * k)
places go to exploration and the rest to exploitation (FedScale's split):

- exploitation, among devices picked before: the score
  S_i = ((min(U_i, clip) - U_min) / (clip - U_min) + staleness_i) * penalty_i,
  with `clip` the `clip_percentile` of the known utilities (outliers - a
  device with a corrupt huge loss - must not take every round). Devices with
  S_i >= `cut_off` x the k-th best score, and at least 10x as many as needed,
  are sampled without replacement with probability ~ S_i;
- exploration, among devices never picked: without a utility yet, they are
  ranked by speed alone, penalty_i from the measured or predicted round time,
  and sampled ~ penalty_i from the `sample_window` x needed best.

T is the `round_threshold` percentile of the expected round times of the
fleet (measured, else the profile's prediction; 100 = no penalty). The pacer
(every `pacer_step` rounds) compares the utility of the last two windows, per
round the mean utility of the devices exploited the round before that
trained: if it stalled (changed by <= 10%) it relaxes T by `pacer_delta`
percentile points so slower devices get in; if it swung by >= 5x it tightens
T again. With `blacklist_rounds` set, a device that has trained more than
that many rounds is never picked again (the paper's guard against a few
devices - possibly with corrupted data - dominating the model), at most
`blacklist_max_len` of the fleet, the most-trained first.

Differences from the paper and FedScale's selector, and why:

- Statistical utility: |B_i| x |mean loss| instead of |B_i| sqrt(mean of
  the squared per-sample losses): a client reports one mean loss, not its
  per-sample losses (fedbench/ledger.py).
- Normalisation: the clipped utility is scaled by (clip - U_min); FedScale
  divides by (max - U_min) with the unclipped max, so one outlier shrinks
  every device's statistical term below the staleness bonus - the outlier
  the clip is there to neutralise would still steer selection.
- The clip value and T are interpolated percentiles (numpy); FedScale takes
  the sorted list's element at int(n x percentile).
- Cut-off: `cut_off` x the score of the k-th best; FedScale's index points at
  the (k+1)-th (and fails when no device is left past it).
- A short side is filled from the other: with too few never-picked devices
  the rest of the round is exploited (and the reverse); FedScale's selector
  then returns fewer than k devices. Every fedbench strategy fills its round.
- Exploration ranks by speed alone; FedScale multiplies the penalty by the
  client's data size, which fedbench's server learns only from a report.
- The first round explores by predicted speed; FedScale's first round is
  uniformly random (it has no predictions before clients report).
- The blacklist counts rounds trained (the ledger's `participation`), as
  FedScale counts feedback reports; the paper says "selected".
- "Picked before" is any pick (the ledger's `selected`); FedScale keeps a
  client unexplored until its first report, so one that always times out is
  re-explored. fedbench exploits it with no utility (staleness bonus only).
- Defaults are the paper's and FedScale's (`OortParams`), except where the
  sources disagree: `clip_percentile` 95 (the paper's example and its
  artifact, SymbioticLab/Oort; FedScale's parser says 90), `cut_off` 0.95
  (the paper's c = 95%; FedScale's parser has 0.05 next to a "95 percentile"
  comment), `blacklist_rounds` off (FedScale's -1). Over-commitment is the
  base option `overcommit` (0 by default, so strategies compare at equal
  round size; FedScale's 1.3 is overcommit=0.3).
- `alpha` is FedScale's `round_penalty` (its `exploration_alpha` only feeds
  a log line).
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

OK = STATUS_CODE["ok"]


@dataclass(frozen=True)
class OortParams:
    """Oort's knobs: the one place their defaults are written (FedScale's names in brackets)."""

    exploration: float = 0.9  # [exploration_factor]
    exploration_decay: float = 0.98
    exploration_min: float = 0.3
    alpha: float = 2.0  # [round_penalty]
    round_threshold: float = 30.0
    clip_percentile: float = 95.0  # [clip_bound], as a percentile
    cut_off: float = 0.95  # [cut_off_util]
    sample_window: float = 5.0
    pacer_step: int | None = 20  # None: no pacer
    pacer_delta: float = 5.0
    blacklist_rounds: int | None = None  # None: no blacklist [-1]
    blacklist_max_len: float = 0.3

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
        if self.blacklist_rounds is not None:
            check_number(
                "blacklist_rounds", self.blacklist_rounds, 0, 1e9, integer=True, meaning="or null"
            )
        check_number("blacklist_max_len", self.blacklist_max_len, 0.0, 1.0, meaning="of the fleet")


_P = OortParams  # the defaults below are read from here


class Oort(SelectionStrategy):
    signals = ("train_loss",)  # its statistical utility: the loss the app reports
    params: OortParams

    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
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
        super().__init__(clients_per_round, seed, overcommit)
        self.start(
            OortParams(
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
            )
        )

    def start(self, params: OortParams) -> None:
        """Take the checked parameters and reset the state they start (a subclass's too)."""
        self.params = params
        self.exploration = float(params.exploration)
        self.round_threshold = float(params.round_threshold)
        self.util_history: list[float] = []  # pacer signal per round, last 2 windows
        # The last call's exploitation picks and its round: the next pacer step's signal.
        self.exploited = np.empty(0, dtype=np.int64)
        self.exploited_round = 0

    def eligible(self, ledger: Ledger, now_s: float) -> np.ndarray:
        idx = super().eligible(ledger, now_s)
        banned = self.blacklist(ledger)
        return idx[~np.isin(idx, banned)] if len(banned) else idx

    def blacklist(self, ledger: Ledger) -> np.ndarray:
        """Devices that trained more than `blacklist_rounds` rounds, most-trained first, capped."""
        limit = self.params.blacklist_rounds
        if limit is None:
            return np.empty(0, dtype=np.int64)
        over = np.flatnonzero(ledger.participation > limit)
        # The cap keeps a long run from blacklisting the whole fleet (FedScale's backup).
        cap = int(self.params.blacklist_max_len * len(ledger))
        if len(over) > cap:
            order = np.argsort(-ledger.participation[over], kind="stable")
            over = over[order[:cap]]
        return over

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        self._pace(ledger, server_round)
        preferred = self._preferred_duration(ledger)
        p = self.params
        self.exploration = max(self.exploration * p.exploration_decay, p.exploration_min)
        seen = ledger.selected[eligible] > 0
        explored, unexplored = eligible[seen], eligible[~seen]
        n_exploit, n_explore = self.split(k, len(explored), len(unexplored))
        exploit = self._exploit(ledger, explored, n_exploit, server_round, preferred)
        self.exploited, self.exploited_round = exploit, server_round
        weights = self.explore_weights(ledger, unexplored, preferred)
        window = top_k(weights, int(np.ceil(p.sample_window * n_explore)), self.rng)
        explore = window[weighted_sample(self.rng, weights[window], n_explore)]
        return np.concatenate([exploit, unexplored[explore]])

    def split(self, k: int, explored: int, unexplored: int) -> tuple[int, int]:
        """(exploit, explore) counts: floor(e k) explore, as FedScale; a short side is filled."""
        # Rounded first so that 10 * 0.3 = 3.0000000000000004 stays 3 and 2.9999... is not 2.
        wanted = int(round(k * self.exploration, 9))
        explore = min(unexplored, k - min(k - wanted, explored))
        return min(k - explore, explored), explore

    def statistical_utility(self, ledger: Ledger, idx: np.ndarray) -> np.ndarray:
        """U_i of devices `idx` (NaN: none yet); EAFL blends the battery in here."""
        return ledger.utility[idx]

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
        u = self.statistical_utility(ledger, idx)
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

    def exploited_utility(self, ledger: Ledger) -> float:
        """Mean utility of the last exploitation picks that have trained since (FedScale's).

        Exploitation, not exploration: the pacer asks whether the devices T lets
        in still pay, and freshly explored devices say nothing about that.
        """
        idx = self.exploited
        done = (ledger.last_round[idx] >= self.exploited_round) & (ledger.last_status[idx] == OK)
        u = np.nan_to_num(self.statistical_utility(ledger, idx[done]), nan=0.0)
        return float(u.sum() / (len(u) + 1e-4))

    def _pace(self, ledger: Ledger, server_round: int) -> None:
        step = self.params.pacer_step
        if step is None or server_round < 2:  # nothing trained before round 1
            return
        self.util_history.append(self.exploited_utility(ledger))
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
            "exploited": self.exploited.tolist(),
            "exploited_round": self.exploited_round,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.exploration = float(state["exploration"])
        self.round_threshold = float(state["round_threshold"])
        self.util_history = [float(x) for x in state["util_history"]]
        # Absent from checkpoints written before the pacer read exploitation only.
        self.exploited = np.asarray(state.get("exploited", []), dtype=np.int64)
        self.exploited_round = int(state.get("exploited_round", 0))
