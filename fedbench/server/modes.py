"""How the server advances the global model (`mode=`): synchronous rounds or FedBuff.

A run mode is a small frozen dataclass of its parameters that builds the
loop which runs it; the server assembly (fedbench.server.app) hands every
mode the same parts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from fedbench.errors import FedbenchError
from fedbench.server.close.base import RoundClose
from fedbench.server.loop import LoopParts, RoundLoop


class RunMode(ABC):
    name: str = ""

    @abstractmethod
    def loop(self, parts: LoopParts) -> RoundLoop: ...

    @abstractmethod
    def check(self, fleet_size: int, picked: int, close: RoundClose) -> None:
        """Refuse (FedbenchError) settings this fleet can never satisfy (`picked`: a round's
        devices; `close`: the experiment's round-close policy), before anything starts."""


@dataclass(frozen=True)
class Synchronous(RunMode):
    """Rounds: pick devices, await them (the round-close policy cuts), aggregate, repeat."""

    name = "sync"

    def loop(self, parts: LoopParts) -> RoundLoop:
        return RoundLoop(parts)

    def check(self, fleet_size: int, picked: int, close: RoundClose) -> None:
        close.check_round(picked)


@dataclass(frozen=True)
class FedBuff(RunMode):
    """Buffered asynchronous aggregation (Nguyen et al., "Federated Learning with Buffered
    Asynchronous Aggregation", AISTATS'22).

    Up to `concurrency` devices train at once, each on the global model of its
    start; the server aggregates every `buffer_size` arrivals, each update
    weighted by its staleness s (the server versions since its device started):
    `constant` 1, or `polynomial` 1 / (1 + s)^staleness_exponent (the paper's
    1/sqrt(1+s) at 0.5). Updates staler than `max_staleness` are dropped
    (status timeout). A device that finishes is replaced by the selector's
    next pick. Clients send what the Flower strategy aggregates.
    """

    buffer_size: int = 10
    concurrency: int | None = None  # None: the strategy's clients_per_round x (1 + overcommit)
    staleness: Literal["constant", "polynomial"] = "polynomial"
    staleness_exponent: float = 0.5
    max_staleness: int | None = None

    name = "fedbuff"

    def __post_init__(self) -> None:
        for key in ("buffer_size", "concurrency", "max_staleness"):
            value = getattr(self, key)
            if value is None and key != "buffer_size":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < (key != "max_staleness")
            ):
                raise FedbenchError(f"mode.{key} must be a positive integer, got {value!r}")
        if self.staleness not in ("constant", "polynomial"):
            raise FedbenchError(f"mode.staleness={self.staleness!r}: valid: constant, polynomial")
        exponent = self.staleness_exponent
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent < 0:
            raise FedbenchError(f"mode.staleness_exponent must be >= 0, got {exponent!r}")

    def check(self, fleet_size: int, picked: int, close: RoundClose) -> None:
        # FedBuff has no rounds to close: `close` does not apply (the loop says so at start).
        for key in ("buffer_size", "concurrency"):
            value = getattr(self, key)
            if value is not None and value > fleet_size:
                what = (
                    "an aggregation would wait for more updates than there are devices"
                    if key == "buffer_size"
                    else "no more devices than the fleet's can train at once"
                )
                raise FedbenchError(
                    f"mode.{key}={value} is larger than the fleet ({fleet_size} devices): {what}; "
                    f"choose 1..{fleet_size}" + (" or null" if key == "concurrency" else "")
                )

    def weight(self, staleness: int) -> float:
        """How much an update `staleness` versions old counts."""
        if self.staleness == "constant":
            return 1.0
        return float((1.0 + staleness) ** -self.staleness_exponent)

    def loop(self, parts: LoopParts) -> RoundLoop:
        from fedbench.server.fedbuff import FedBuffLoop

        return FedBuffLoop(parts, self)
