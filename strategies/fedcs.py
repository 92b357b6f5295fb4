"""FedCS: client selection under a round deadline (Nishio & Yonetani,
ICC'19, "Client Selection for Federated Learning with Heterogeneous
Resources in Mobile Edge").

Selection signal: expected round time - local training time (measured,
else the profile's prediction) and communication time (measured round trip
minus training, else predicted). Clients must send nothing beyond the
standard RoundReport (latency_s, round_trip_s).

As in the paper, the server first asks a random share of the devices
(`request_fraction` of the eligible ones, at least `max_clients`) for their
resource information, then greedily schedules among them: repeatedly add
the device that lengthens the round least, keep it if the round still ends
within `deadline_s`, skip it otherwise, and stop at `max_clients`. With
Theta the elapsed scheduled time (0 at start):

- `shared_uplink: true`, the paper's model (one cell, uploads take turns,
  training runs in parallel): adding device x gives
  Theta' = Theta + t_up(x) + max(0, t_train(x) - Theta), where t_up is half
  the device's communication time (download and upload carry the same model);
- `shared_uplink: false`, fedbench's emulator (every device has its own
  link, a round lasts as long as its slowest device): Theta' = max(Theta,
  t_round(x)), so the schedule is the fastest devices that fit.

So FedCS sizes its own rounds: it returns as many devices as fit the
deadline, from none to `max_clients`, which may be more or fewer than
`clients_per_round` (which only bounds the candidate pool from below:
max_clients defaults to it). A device with no time at all (no measurement,
no profile) is assumed to fit: FedCS's resource request would have asked
it, and one round measures it.

Differences from the paper, and why:

- Default link model: `shared_uplink: false`, each device on its own link,
  because that is what fedbench's emulator and deployments measure (a round
  lasts as long as its slowest device); the paper's one-cell model, where
  uploads take turns, is `shared_uplink: true`. Under either model the
  selection is the paper's greedy rule: add the device that lengthens the
  schedule least while the round still fits.
- Resource information: the paper's clients report their channel state,
  compute capability and data size and the server estimates times from them;
  fedbench's server uses the last measured times, else the profile's
  predictions - no request round trip is modelled.
- Request pool: the paper asks ceil(K x C) random clients; fedbench asks
  `request_fraction` of the eligible ones but at least `max_clients`, so a
  small fraction of a small fleet can still fill a round.
- Round size: the paper maximises the number of selected clients with no
  cap; `max_clients` caps it (set it high for the paper's rule) so a huge
  fleet cannot put thousands of devices in one round.
- Deadline: `deadline_s` is the time the clients' part of the round may take;
  the paper's T_round also holds the selection step and the aggregation,
  which fedbench's clock does not charge.
- Estimates can be wrong: a device that misses the deadline anyway is timed
  out by the round close (`round_close=deadline`), not by the selector.
"""

from __future__ import annotations

import math

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.ledger import Ledger
from strategies.base import SelectionStrategy
from strategies.common import check_number, comm_time_s, compute_time_s


class FedCS(SelectionStrategy):
    def __init__(
        self,
        clients_per_round: int,
        deadline_s: float,
        seed: int = 0,
        max_clients: int | None = None,
        request_fraction: float = 0.5,
        shared_uplink: bool = False,
    ) -> None:
        # No overcommit: the deadline, not a count, sizes FedCS's rounds.
        super().__init__(clients_per_round, seed)
        self.deadline_s = check_number("deadline_s", deadline_s, 0.0, math.inf, meaning="seconds")
        cap = clients_per_round if max_clients is None else max_clients
        self.max_clients = int(check_number("max_clients", cap, 1, 1e9, integer=True))
        self.request_fraction = check_number("request_fraction", request_fraction, 0.0, 1.0)
        if not isinstance(shared_uplink, bool):
            raise FedbenchError(
                f"strategy.shared_uplink must be true or false, got {shared_uplink!r}"
            )
        self.shared_uplink = shared_uplink

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        asked = min(
            len(eligible), max(self.max_clients, math.ceil(self.request_fraction * len(eligible)))
        )
        pool = self.rng.choice(eligible, size=asked, replace=False)
        train = np.nan_to_num(compute_time_s(ledger, pool), nan=0.0)
        comm = comm_time_s(ledger, pool)
        if self.shared_uplink:
            return pool[self._schedule_shared(train, comm / 2.0, comm / 2.0)]
        total = train + comm
        fits = np.flatnonzero(total <= self.deadline_s)
        order = fits[np.argsort(total[fits], kind="stable")]
        return pool[order[: self.max_clients]]

    def _schedule_shared(self, train: np.ndarray, down: np.ndarray, up: np.ndarray) -> np.ndarray:
        """The paper's Algorithm 1; the download is a broadcast, as long as its slowest receiver."""
        left = np.ones(len(train), dtype=bool)
        picked: list[int] = []
        theta, broadcast = 0.0, 0.0
        while len(picked) < self.max_clients:
            grow = up + np.maximum(0.0, train - theta)
            # theta + grow = up + max(theta, train) only grows with theta, so a device
            # that does not fit now never will: dropping them all at once is the
            # paper's one-by-one skip, without a pass per skipped device.
            left &= np.maximum(broadcast, down) + theta + grow <= self.deadline_s
            if not left.any():
                break
            x = int(np.argmin(np.where(left, grow, np.inf)))
            left[x] = False
            theta += float(grow[x])
            broadcast = max(broadcast, float(down[x]))
            picked.append(x)
        return np.asarray(picked, dtype=np.int64)
