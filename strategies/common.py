"""What several strategies share: ledger-derived signals, sampling, parameter checks.

Signals prefer a measurement over a prediction: a device's last measured
round trip beats its profile's prediction, which beats nothing (NaN). All
functions take index arrays and work on whole arrays, so a round over
100,000 devices costs a few numpy passes.
"""

from __future__ import annotations

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger


def round_time_s(ledger: Ledger, idx: np.ndarray) -> np.ndarray:
    """Expected round duration: measured round trip, else predicted compute + comm, else NaN."""
    measured = ledger.round_trip_s[idx]
    # A host device has no communication model; its prediction is compute only.
    predicted = ledger.pred_latency_s[idx] + np.nan_to_num(ledger.pred_comm_s[idx], nan=0.0)
    return np.where(np.isnan(measured), predicted, measured)


def compute_time_s(ledger: Ledger, idx: np.ndarray) -> np.ndarray:
    """Expected local training time: measured, else predicted, else NaN."""
    measured = ledger.latency_s[idx]
    return np.where(np.isnan(measured), ledger.pred_latency_s[idx], measured)


def comm_time_s(ledger: Ledger, idx: np.ndarray) -> np.ndarray:
    """Expected download + upload time: measured (round trip - compute), else predicted, else 0."""
    measured = ledger.round_trip_s[idx] - ledger.latency_s[idx]
    value = np.where(np.isnan(measured), ledger.pred_comm_s[idx], measured)
    return np.nan_to_num(value, nan=0.0)


def energy_j(ledger: Ledger, idx: np.ndarray) -> np.ndarray:
    """Expected energy of one round: measured, else predicted, else NaN."""
    measured = ledger.energy_j[idx]
    return np.where(np.isnan(measured), ledger.pred_energy_j[idx], measured)


def staleness_bonus(ledger: Ledger, idx: np.ndarray, server_round: int) -> np.ndarray:
    """Oort's temporal uncertainty sqrt(0.1 ln(round) / last_round): grows for devices left out."""
    last = np.maximum(ledger.last_round[idx], 1).astype(np.float64)
    return np.sqrt(0.1 * np.log(max(server_round, 1)) / last)


def top_k(values: np.ndarray, k: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Positions of the k largest values (NaN counts as smallest), largest first.

    With `rng`, ties are broken at random; without, by position - which would
    always favour the first devices of the fleet among equals.
    """
    k = min(k, len(values))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    v = np.where(np.isnan(values), -np.inf, values)
    perm = rng.permutation(len(v)) if rng is not None else np.arange(len(v))
    vp = v[perm]
    part = np.argpartition(-vp, k - 1)[:k] if k < len(vp) else np.arange(len(vp))
    return perm[part[np.argsort(-vp[part], kind="stable")]]


def weighted_sample(rng: np.random.Generator, weights: np.ndarray, k: int) -> np.ndarray:
    """k distinct positions drawn without replacement with probability proportional to weight.

    Efraimidis & Spirakis (2006) keys u^(1/w): one vectorised pass instead of
    numpy's repeated rejection rounds, and the same distribution as drawing
    one at a time. Zero, negative or NaN weights are drawn last, uniformly.
    """
    k = min(k, len(weights))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    w = np.nan_to_num(np.asarray(weights, dtype=np.float64), nan=0.0)
    u = rng.random(len(w))
    positive = w > 0
    keys = np.full(len(w), -np.inf)
    keys[positive] = np.log(u[positive]) / w[positive]
    picked = top_k(keys, min(k, int(positive.sum())))
    if len(picked) < k:
        rest = np.flatnonzero(~positive)
        picked = np.concatenate([picked, rest[top_k(u[rest], k - len(picked))]])
    return picked


def check_number(
    key: str,
    value: object,
    low: float,
    high: float,
    *,
    integer: bool = False,
    meaning: str = "",
) -> float:
    """`value` as a float if it is a number in [low, high]; else a FedbenchError naming the key."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (integer and not isinstance(value, int))
        or not low <= value <= high
    ):
        what = "an integer" if integer else "a number"
        hint = f" ({meaning})" if meaning else ""
        raise FedbenchError(
            f"strategy.{key} must be {what} in [{low:g}, {high:g}]{hint}, got {value!r}"
        )
    return float(value)
