"""Close at the k-th update: over-commit, keep the first k (Bonawitz et al., MLSys'19).

"Towards Federated Learning at Scale" selects ~130% of the devices a round
needs and closes the round once the target number have reported; FedScale
and Oort run their rounds this way. With `strategy.overcommit=0.3` the
selector picks ceil(1.3 k) devices; this policy keeps the first `k` ok
replies (default: the strategy's clients_per_round) in arrival order and
marks the later ones `timeout`. An optional `deadline_s` still bounds the
round when fewer than k arrive in time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fedbench.core.records import RoundReport
from fedbench.errors import FedbenchError
from fedbench.server.close.base import Closing, RoundClose, arrival_s, check_deadline, longest


class FirstK(RoundClose):
    name = "first_k"

    def __init__(self, k: int | None = None, deadline_s: float | None = None) -> None:
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise FedbenchError(f"round_close.k must be a positive integer or null, got {k!r}")
        self.k = k
        self.deadline_s = check_deadline(deadline_s, "round_close.deadline_s")

    def check_round(self, picked: int) -> None:
        if self.k is not None and self.k > picked:
            raise FedbenchError(
                f"round_close.k={self.k} is larger than the devices a round picks ({picked}: "
                "strategy.clients_per_round x (1 + strategy.overcommit)), so no round could "
                f"close at its k-th update; choose k <= {picked}, or null for clients_per_round"
            )

    def close(self, reports: Sequence[RoundReport], wanted: int) -> Closing:
        k = self.k or wanted
        limit = math.inf if self.deadline_s is None else self.deadline_s
        arrived = sorted(
            (r for r in reports if r.status == "ok" and arrival_s(r) <= limit),
            key=lambda r: (arrival_s(r), r.device),
        )
        kept, after = arrived[:k], arrived[k:]
        late = {r.device: f"arrived after the round closed at the first {k} updates" for r in after}
        late |= {
            r.device: f"round trip {arrival_s(r):.2f}s > deadline {self.deadline_s:g}s"
            for r in reports
            if r.status == "ok" and arrival_s(r) > limit
        }
        if len(kept) == k:
            return Closing(arrival_s(kept[-1]), late, f"first {k} updates", self.name)
        duration = min(longest(reports), limit)
        return Closing(duration, late, f"{len(kept)} of {k} updates by the end", self.name)
