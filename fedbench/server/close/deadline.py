"""A round deadline: replies later than `deadline_s` after the round started do not count.

FedScale's and FedCS's rounds (Nishio & Yonetani, ICC'19): the server stops
waiting at the deadline; a straggler's update is dropped (`timeout`) but
the energy it spent is recorded. The round ends at the last reply that made
it, or at the deadline if one did not.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedbench.core.records import RoundReport
from fedbench.server.close.base import Closing, RoundClose, arrival_s, check_deadline, longest


class Deadline(RoundClose):
    name = "deadline"

    def __init__(self, deadline_s: float) -> None:
        checked = check_deadline(deadline_s, "round_close.deadline_s")
        if checked is None:
            raise ValueError("round_close.deadline_s is required (seconds)")
        self.deadline_s = checked

    def close(self, reports: Sequence[RoundReport], wanted: int) -> Closing:
        late = {
            r.device: f"round trip {arrival_s(r):.2f}s > deadline {self.deadline_s:g}s"
            for r in reports
            if r.status == "ok" and arrival_s(r) > self.deadline_s
        }
        duration = min(longest(reports), self.deadline_s)
        reason = f"deadline {self.deadline_s:g}s" if late else "every reply before the deadline"
        return Closing(duration, late, reason, self.name)
