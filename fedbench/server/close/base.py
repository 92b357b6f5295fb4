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


# The shortest deadline accepted, in seconds. A deadline no device can meet is a mistake
# (a unit, a typo), not an experiment: every round closes with nothing and the run fails
# with no update after spending its whole time. Refused up front instead, with a floor no
# round trip beats: an emulated device's trip holds two of its profile's network round
# trips (rtt_ms is 1 ms or more in every shipped profile) besides its training and the
# model's transfer, and a real device's or host's trip a Flower message each way. Above
# the floor, whether a deadline is met is the experiment's result: rounds close with their
# late devices as timeouts, and say so.
MIN_DEADLINE_S = 1e-3


def check_deadline(deadline_s: float | None, where: str) -> float | None:
    from fedbench.errors import FedbenchError

    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)):
        raise FedbenchError(f"{where} must be a number of seconds or null, got {deadline_s!r}")
    if not math.isfinite(deadline_s) or deadline_s <= 0:
        raise FedbenchError(f"{where}={deadline_s!r}: must be finite and > 0")
    if deadline_s < MIN_DEADLINE_S:
        raise FedbenchError(
            f"{where}={deadline_s:g}: shorter than any round trip (the model down, a training "
            f"step, the update back) can be, so every round would time out; give seconds, "
            f">= {MIN_DEADLINE_S:g} (e.g. {where}=60)"
        )
    return float(deadline_s)


def build_close(experiment: Experiment) -> RoundClose:
    """The experiment's round-close policy (`round_close=`), refused unless it is one."""
    return built(experiment.round_close, RoundClose, "a round-close policy (fedbench.server.close)")
