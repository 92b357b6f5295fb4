"""Populations for tests: the default phone distributions over a fleet of profiles."""

from __future__ import annotations

import numpy as np

from fedbench.devices.profile import load_profile
from fedbench.experiment.population import PopulationConfig
from fedbench.population.draw import Population, draw

PHONES = ("samsung_s8plus", "samsung_note10", "redmi_note9pro", "xiaomi_mi9")


def phones(n: int, seed: int = 0, config: PopulationConfig | None = None) -> Population:
    """n phones, the four profiles in turn, drawn from `config` (default: the defaults)."""
    profiles = [load_profile(p) for p in PHONES]
    code = (np.arange(n) % len(PHONES)).astype(np.int32)
    return draw(config or PopulationConfig(), profiles, code, seed)
