"""How the server advances the global model (`mode=`): the base, and synchronous rounds.

A run mode is a small frozen dataclass of its parameters that builds the
loop which runs it; the server assembly (fedbench.server.app) hands every
mode the same parts. `Synchronous` runs fedbench's own ServerApp
(fedbench.server.own_app) on the FleetGrid, in the one synchronous loop
every app runs in (AppLoop, fedbench.server.app_loop); `FedBuff` and its
loop share a file (fedbench.server.fedbuff).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass

from fedbench.experiment.build import built
from fedbench.experiment.schema import Experiment
from fedbench.server.app_loop import AppLoop
from fedbench.server.close.base import RoundClose
from fedbench.server.loop import LoopParts, RoundLoop
from fedbench.server.own_app import OwnServerApp


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
        """fedbench's own ServerApp on the FleetGrid: the one synchronous loop (AppLoop)."""
        app = OwnServerApp(parts.fleet, parts.evaluator, parts.train_config, parts.timeout_s)
        return AppLoop(parts, app)

    def check(self, fleet_size: int, picked: int, close: RoundClose) -> None:
        close.check_round(picked)


@functools.lru_cache(maxsize=8)
def build_mode(experiment: Experiment) -> RunMode:
    """The experiment's run mode (`mode=`), refused unless it is a RunMode."""
    return built(experiment.mode, RunMode, "a run mode (fedbench.server.modes)")
