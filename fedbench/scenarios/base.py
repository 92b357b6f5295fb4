"""What a scenario decides: the round schedule and each device's data per round.

The server loop (fedbench.app.experiment) is the same for every scenario; a
scenario subclass says when rounds happen, which day they belong to, and
what a device trains on. Clients call `device_data`, the server calls
`schedule` - both from the same config, so they agree without talking.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.scenarios.context import DataContext

if TYPE_CHECKING:
    from fedbench.scenarios.pretrain import PretrainParams


@dataclass(frozen=True)
class RoundSpec:
    round: int  # 1-based, over the whole run
    day: int  # 1-based day the round belongs to (plain FL: the round itself)
    earliest_start_s: float  # virtual time before which the round cannot start
    evaluate: bool  # evaluate the global model after this round (end of a day)


def positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FedbenchError(f"{name} must be a positive integer, got {value!r}")
    return value


class Scenario(ABC):
    pretrain: PretrainParams  # how the server pretrains the global model (epochs 0: none)

    @abstractmethod
    def schedule(self) -> list[RoundSpec]:
        """Every round of the run, in order."""

    @abstractmethod
    def device_data(self, ctx: DataContext, device_index: int, day: int) -> Tensors:
        """What device `device_index` trains on in a round of `day`."""

    @abstractmethod
    def expected_examples(self, ctx: DataContext, device_index: int) -> int:
        """How many examples a round of this device trains on (for predictions)."""
