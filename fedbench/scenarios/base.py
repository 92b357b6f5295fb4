"""What a scenario decides: the round schedule and each device's data per round.

The server loop (fedbench.server.loop) is the same for every scenario; a
scenario subclass says when rounds happen, which day they belong to, and
what a device trains on. Clients call `device_data`, the server calls
`schedule` - both from the same config, so they agree without talking.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.experiment.build import built
from fedbench.experiment.schema import Experiment
from fedbench.scenarios.context import DataContext

if TYPE_CHECKING:
    from fedbench.scenarios.pretrain import PretrainParams


@dataclass(frozen=True)
class RoundSpec:
    round: int  # 1-based, over the whole run
    day: int  # 1-based day the round belongs to (plain FL: the round itself)
    earliest_start_s: float  # virtual time before which the round cannot start
    evaluate: bool  # evaluate the global model after this round (end of a day)


# A run longer than this is a typo (1e9 days), refused before anything is built.
MAX_ROUNDS = 1_000_000


def positive_int(name: str, value: object, at_most: int = MAX_ROUNDS) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FedbenchError(f"{name} must be a positive integer, got {value!r}")
    if value > at_most:
        raise FedbenchError(f"{name}={value}: at most {at_most:,}")
    return value


class Scenario(ABC):
    pretrain: PretrainParams  # how the server pretrains the global model (epochs 0: none)
    unit: str = "round"  # what an evaluation is reported per: "day" or "round"

    @abstractmethod
    def schedule(self) -> Iterator[RoundSpec]:
        """Every round of the run, in order (lazily: a long run is not a long list)."""

    @abstractmethod
    def device_data(self, ctx: DataContext, device_index: int, day: int) -> Tensors:
        """What device `device_index` trains on in a round of `day`."""

    def data_key(self, device_index: int, day: int) -> Hashable:
        """What names `device_data(ctx, device_index, day)` within one run: equal keys, equal
        data (a worker keeps it on its accelerator across rounds, fedbench.train.resident).
        Here the device and the day; a scenario whose data does not change by day says so."""
        return (device_index, day)

    @abstractmethod
    def expected_examples(self, ctx: DataContext, device_index: int) -> int:
        """How many examples a round of this device trains on (for predictions)."""

    def expected_examples_of(self, ctx: DataContext, devices: np.ndarray) -> np.ndarray:
        """`expected_examples` of many devices at once (a scenario may vectorise it)."""
        return np.array([self.expected_examples(ctx, int(i)) for i in devices], dtype=float)


@functools.lru_cache(maxsize=8)
def build_scenario(experiment: Experiment) -> Scenario:
    """The experiment's scenario (`scenario=`), refused unless it is a fedbench Scenario."""
    return built(experiment.scenario, Scenario, "a fedbench scenario (fedbench.scenarios)")
