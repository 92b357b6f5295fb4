"""The power model's activity factors, fitted to measured whole-device power during training.

The energy rows (calibration/data/training_measurements.csv `train_power_w`,
`idle_power_w`: the Meizu 16T's USB input plus battery discharge, sampled
through every training run of the MNN benchmark) give each step's energy
above idle, `(train_power_w - idle_power_w) x train_ms_per_step`. The
emulator's energy above idle is its CPU term (the profile's per-core and
cluster power at the step's clocks over each phase), its DRAM term (the
profile's `mem_w_per_gbs` per byte that misses the cache) and, on a GPU,
its GPU term. The shared factors `core_power_scale` and
`dram_energy_scale` multiply the first two, so given the time constants
the prediction is linear in them: they are fitted here, after the time
fit, by least squares on log energy with log-normal priors
(params.ENERGY_PARAMS), and cross-validated with the same folds as the
time constants (each fold's energy terms come from that fold's time
constants, its factors from that fold's training rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import params
from rows import Row
from scipy.optimize import least_squares

from fedbench.devices.constants import Constants
from fedbench.devices.emulator import emulate
from fedbench.devices.profile import initial_state, load_profile
from fedbench.measure.workload import Workload


@dataclass(frozen=True)
class Terms:
    """Per energy row, the emulator's energy terms at factors of 1, and its step time."""

    index: np.ndarray  # into the calibration rows
    cpu_j: np.ndarray
    memory_j: np.ndarray
    gpu_j: np.ndarray
    seconds: np.ndarray

    def energy_j(self, scales: np.ndarray) -> np.ndarray:
        """Energy above idle per step at these factors (params.ENERGY_PARAMS order)."""
        core, dram = scales
        return core * self.cpu_j + dram * self.memory_j + self.gpu_j


def energy_rows(rows: Sequence[Row]) -> np.ndarray:
    return np.array([i for i, r in enumerate(rows) if r.energy_j is not None], dtype=int)


def terms(rows: Sequence[Row], loads: Sequence[Workload], consts: Constants) -> Terms:
    """Emulate every energy row once (the factors in `consts` are ignored: set to 1)."""
    index = energy_rows(rows)
    out = np.zeros((4, len(index)))
    for k, i in enumerate(index):
        r = rows[i]
        profile = load_profile(r.device)
        e = emulate(profile, [(loads[i], 1)], initial_state(profile, 0.0), r.knobs, consts)
        shared = consts.fitted.shared
        out[:, k] = (
            e.energy_terms_j["cpu"] / shared.core_power_scale,
            e.energy_terms_j["memory"] / shared.dram_energy_scale,
            e.energy_terms_j["gpu"],
            e.latency_s,
        )
    return Terms(index, *out)


def measured(rows: Sequence[Row], t: Terms) -> np.ndarray:
    return np.array([rows[i].energy_j for i in t.index], dtype=float)


def fit_scales(t: Terms, target: np.ndarray, train: np.ndarray) -> np.ndarray:
    """The factors that best explain `target[train]` (log error, log-normal priors)."""
    centre = np.log(params.energy_guesses())
    sigma = np.array([p.sigma for p in params.ENERGY_PARAMS])
    lower = np.log([p.lower for p in params.ENERGY_PARAMS])
    upper = np.log([p.upper for p in params.ENERGY_PARAMS])
    if not train.any():
        return np.exp(centre)  # no row to learn from: the priors

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = t.energy_j(np.exp(x))[train]
        return np.concatenate([np.log(pred / target[train]), (x - centre) / sigma])

    sol = least_squares(residuals, centre, bounds=(lower, upper))
    return np.exp(sol.x)


def rounded(scales: np.ndarray) -> np.ndarray:
    return np.array([float(f"{v:.4g}") for v in scales])
