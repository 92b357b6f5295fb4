"""The base of every device-selection strategy.

Selection is a strategy's only job: given the ledger (per-device history of
RoundReports) and the virtual clock, return the devices that train this
round. Aggregation stays Flower's. A strategy subclasses `SelectionStrategy`
and overrides `choose`; `eligible` may be overridden to change which devices
are considered at all. By default a device is eligible when it is available
and not predicted to run out of memory (its profile's predicted peak for
this workload exceeds its training memory budget): picking it would only
waste a round slot.

Over-commitment (Bonawitz et al., "Towards Federated Learning at Scale",
MLSys'19: pick ~30% more devices than needed because some drop out) is a
base option: `overcommit=0.3` asks `choose` for ceil(1.3 * clients_per_round).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.experiment.build import built
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger


class SelectionStrategy(ABC):
    """Pick `clients_per_round` devices per round from the ledger."""

    # RoundReport fields the strategy selects by that only the app can supply (its
    # metrics): a run whose replies carry none of them is warned about, once.
    signals: ClassVar[tuple[str, ...]] = ()

    def __init__(self, clients_per_round: int, seed: int = 0, overcommit: float = 0.0) -> None:
        if (
            isinstance(clients_per_round, bool)
            or not isinstance(clients_per_round, int)
            or (clients_per_round < 1)
        ):
            raise FedbenchError(
                f"strategy.clients_per_round must be a positive integer, got {clients_per_round!r}"
            )
        if (
            isinstance(overcommit, bool)
            or not isinstance(overcommit, (int, float))
            or not 0.0 <= overcommit <= 10.0
        ):
            raise FedbenchError(
                f"strategy.overcommit must be a number in [0, 10] (0.3 = pick 30% more devices), "
                f"got {overcommit!r}"
            )
        self.clients_per_round = clients_per_round
        self.overcommit = float(overcommit)
        self.rng = np.random.default_rng(seed)

    def check_fleet(self, fleet_size: int) -> None:
        """Refuse a configuration that can never fill a round."""
        if self.clients_per_round > fleet_size:
            raise FedbenchError(
                f"strategy.clients_per_round={self.clients_per_round} is larger than the fleet "
                f"({fleet_size} devices); choose 1..{fleet_size} or a larger fleet"
            )

    def select(
        self, ledger: Ledger, server_round: int, now_s: float, k: int | None = None
    ) -> np.ndarray:
        """Sorted device indices to train in `server_round` (may be fewer than asked).

        `k` asks for that many instead of the round's (asynchronous FL replaces
        the devices that finished, a few at a time).
        """
        eligible = self.eligible(ledger, now_s)
        k = min(self.wanted() if k is None else k, len(eligible))
        if k == 0:
            return np.empty(0, dtype=np.int64)
        chosen = np.asarray(self.choose(ledger, eligible, k, server_round, now_s))
        return np.sort(chosen.astype(np.int64))

    def wanted(self) -> int:
        """How many devices to ask for: clients_per_round plus the over-commitment."""
        # Rounded first so that 10 * 1.1 = 11.000000000000002 does not become 12.
        return math.ceil(round(self.clients_per_round * (1.0 + self.overcommit), 9))

    def eligible(self, ledger: Ledger, now_s: float) -> np.ndarray:
        """Devices that may be picked: available and not predicted to run out of memory."""
        # NaN on either side (no profile, no budget yet) compares False: not excluded.
        return np.flatnonzero(ledger.available & ~(ledger.pred_peak_mem_mb > ledger.mem_budget_mb))

    @abstractmethod
    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        """Return k distinct indices out of `eligible`.

        A strategy that sizes rounds itself (FedCS: as many as fit a deadline)
        may return another number of distinct eligible indices; it says so.
        """

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs to continue selection identically."""
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


def build_selector(experiment: Experiment) -> SelectionStrategy:
    """The experiment's selector (`strategy=`), refused unless it is a SelectionStrategy."""
    return built(
        experiment.strategy,
        SelectionStrategy,
        "a device-selection strategy (strategies.base.SelectionStrategy); "
        "Flower strategies go in algorithm=",
    )
