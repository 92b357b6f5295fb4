"""How a round closes: which replies count, and when the round ends on the virtual clock.

The server sends a round's messages and collects every reply; a policy
then reads their arrival times (each report's round trip from the round's
start: emulated for emulated devices, measured for physical and unprofiled
ones) and decides where the round was cut. Replies after the cut are
`timeout`: their update is not aggregated, the energy they spent stays
recorded. One policy per file; `round_close=` picks it by `_target_`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from fedbench.core.records import RoundReport
from fedbench.experiment.build import built
from fedbench.experiment.schema import Experiment


@dataclass(frozen=True)
class Closing:
    duration_s: float  # the round's length on the virtual clock
    late: dict[str, str]  # device name -> why its reply did not count (status timeout)
    reason: str  # what ended the round, for the records
    policy: str = ""  # who closed it: a round-close policy's name, or the run mode's


class RoundClose(ABC):
    """Decide where a round was cut, given every reply's report."""

    name: str = ""  # as written to server_rounds.csv

    @abstractmethod
    def close(self, reports: Sequence[RoundReport], wanted: int) -> Closing:
        """`wanted`: the devices the strategy meant to train (clients_per_round)."""

    def check_round(self, picked: int) -> None:  # noqa: B027 - optional hook
        """Refuse (FedbenchError) a policy that a round of `picked` devices can never satisfy."""


def arrival_s(report: RoundReport) -> float:
    """When a reply arrived, in seconds after the round started (NaN: never)."""
    return report.round_trip_s


def longest(reports: Sequence[RoundReport]) -> float:
    times = [arrival_s(r) for r in reports if not math.isnan(arrival_s(r))]
    return max(times, default=0.0)


def check_deadline(deadline_s: float | None, where: str) -> float | None:
    from fedbench.errors import FedbenchError

    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)):
        raise FedbenchError(f"{where} must be a number of seconds or null, got {deadline_s!r}")
    if not math.isfinite(deadline_s) or deadline_s <= 0:
        raise FedbenchError(f"{where}={deadline_s!r}: must be finite and > 0")
    return float(deadline_s)


def build_close(experiment: Experiment) -> RoundClose:
    """The experiment's round-close policy (`round_close=`), refused unless it is one."""
    return built(experiment.round_close, RoundClose, "a round-close policy (fedbench.server.close)")
