"""Wait for every picked device: the round lasts as long as its slowest reply.

Plain synchronous FL (FedAvg, McMahan et al. 2017): nothing is cut, so one
straggler sets the round's length.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedbench.core.records import RoundReport
from fedbench.server.close.base import Closing, RoundClose, longest


class WaitForAll(RoundClose):
    name = "all"

    def close(self, reports: Sequence[RoundReport], wanted: int) -> Closing:
        return Closing(longest(reports), {}, "every reply awaited", self.name)
