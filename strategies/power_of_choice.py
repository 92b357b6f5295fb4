"""Power-of-choice (Cho, Wang & Joshi, "Client Selection in Federated
Learning: Convergence Analysis and Power-of-Choice Selection Strategies",
arXiv:2010.01243, 2020; AISTATS'22 as "Towards Understanding Biased Client
Selection in Federated Learning").

Selection signal: local loss. Each round, d candidates are drawn without
replacement with probability proportional to their data size |B_i| (the
ledger's `num_examples`; devices that never reported get the mean known
size), and the k candidates with the highest loss train. Biasing towards
high loss speeds up convergence; d trades that bias (large d) against
fairness (d = k is plain size-weighted sampling). d is `d` when set, else
ceil(`candidate_factor` x k). Clients must send nothing beyond the standard
RoundReport (num_examples, train_loss).

The paper's variants differ only in the loss the candidates are ranked by:

- pow-d: each candidate's loss F_i(w_t) on the current global model over
  all its data, which it computes and sends when asked;
- cpow-d: the same, estimated on a mini-batch (less computation);
- rpow-d: the loss a client reported when it last trained (the mean over its
  local steps), so selection costs no computation and no communication.

fedbench's selector runs before a round's messages are sent and cannot ask
candidates anything, so `variant` is:

- `rpow-d` (default): exactly the paper's rpow-d - `train_loss`, the mean
  training loss the device reported when it last trained.
- `pow-d`, approximated: a candidate's last reported loss divided by the
  mean loss that every device reporting in that same round reported. The
  paper compares all candidates on one model, w_t; raw losses reported in
  different rounds were taken on different models, and an early one is high
  only because the model was worse then (rpow-d's known bias towards
  devices that trained long ago). The ratio keeps what belongs to the
  device - how much harder its data is than the fleet's at the time -
  assuming the global model lowers every device's loss by the same factor.
- `cpow-d` is refused: it differs from pow-d only in how a candidate
  computes the loss it would be asked for, which fedbench cannot ask.

A device that was never picked has loss +inf: it is tried as soon as it
becomes a candidate (the paper's pow-d would ask it; rpow-d's initial
losses are not reported). A device that was picked but never finished a
round (it always misses the deadline or fails) has loss -inf: it trains only
when no other candidate is left.

Differences from the paper, and why:

- pow-d is approximated as above; cpow-d is not offered.
- Data sizes: the paper's server knows every client's |B_i| beforehand;
  fedbench's learns it from a device's first report and draws devices that
  never reported with the mean known size.
- d: the paper sweeps d from m to K (no single default); fedbench defaults
  to 3k. With over-commitment or a smaller asynchronous top-up, d is at
  least the k asked for.
- Aggregation is `algorithm=`'s (FedAvg weights updates by num_examples);
  the paper averages the m updates with equal weights, the candidates'
  size-proportional draw standing in for the weighting. Selection cannot
  change that; `algorithm=` would.
- Failures: the paper's clients always finish; fedbench's may time out or
  fail, hence the -inf rule above.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.ledger import STATUS_CODE, Ledger
from strategies.base import SelectionStrategy
from strategies.common import check_number, top_k, weighted_sample

VARIANTS = ("rpow-d", "pow-d")


class PowerOfChoice(SelectionStrategy):
    signals = ("train_loss",)  # its statistical utility: the loss the app reports

    def __init__(
        self,
        clients_per_round: int,
        seed: int = 0,
        overcommit: float = 0.0,
        candidate_factor: float = 3.0,
        d: int | None = None,
        variant: str = "rpow-d",
    ) -> None:
        super().__init__(clients_per_round, seed, overcommit)
        self.candidate_factor = check_number(
            "candidate_factor", candidate_factor, 1.0, 1e6, meaning="d = factor x k candidates"
        )
        if d is not None:
            check_number("d", d, clients_per_round, 1e9, integer=True, meaning="candidates, >= k")
        self.d = d
        if variant == "cpow-d":
            raise FedbenchError(
                "strategy.variant=cpow-d is not offered: it differs from pow-d only in how a "
                "candidate computes the loss it is asked for, and fedbench's selector cannot ask "
                "candidates before a round; use pow-d (approximated) or rpow-d"
            )
        if variant not in VARIANTS:
            raise FedbenchError(
                f"strategy.variant must be one of {', '.join(VARIANTS)}, got {variant!r}"
            )
        self.variant = variant
        # pow-d: the mean loss reported in each round, kept once the round's reports are in.
        self.round_loss: dict[int, float] = {}

    def candidates(self, k: int) -> int:
        """d for a selection of k: `d` if set, else ceil(candidate_factor x k); never below k."""
        d = self.d if self.d is not None else math.ceil(round(self.candidate_factor * k, 9))
        return max(d, k)

    def choose(
        self, ledger: Ledger, eligible: np.ndarray, k: int, server_round: int, now_s: float
    ) -> np.ndarray:
        size = ledger.num_examples[eligible]
        known = np.isfinite(size) & (size > 0)
        fill = float(size[known].mean()) if known.any() else 1.0
        size = np.where(known, size, fill)
        candidates = eligible[weighted_sample(self.rng, size, self.candidates(k))]
        loss = self.loss(ledger, candidates, server_round)
        # No loss yet: never picked -> +inf (try it); picked but never finished
        # (always late or failing) -> -inf, or it would be picked every round.
        tried = ledger.selected[candidates] > 0
        loss = np.where(np.isnan(loss), np.where(tried, -np.inf, np.inf), loss)
        return candidates[top_k(loss, k, self.rng)]

    def loss(self, ledger: Ledger, idx: np.ndarray, server_round: int) -> np.ndarray:
        """The loss devices `idx` are ranked by (NaN: none yet), per `variant`."""
        loss = ledger.train_loss[idx]
        if self.variant == "rpow-d":
            return loss
        self._remember_round_losses(ledger, server_round)
        # A device whose last report failed keeps the loss of an earlier round that the
        # ledger does not date: it is divided by its last round's mean, a later (lower)
        # one, which errs towards retrying it.
        mean = np.array([self.round_loss.get(int(r), np.nan) for r in ledger.last_round[idx]])
        # A zero mean (a perfect model) would divide by zero: every loss is then 0 too.
        return loss / np.maximum(mean, 1e-12)

    def _remember_round_losses(self, ledger: Ledger, server_round: int) -> None:
        """Record the mean loss of each finished round not yet recorded."""
        ok = (ledger.last_status == STATUS_CODE["ok"]) & np.isfinite(ledger.train_loss)
        ok &= ledger.last_round < server_round  # a round still in flight is not complete
        rounds, which = np.unique(ledger.last_round[ok], return_inverse=True)
        means = np.bincount(which, weights=ledger.train_loss[ok]) / np.bincount(which)
        for r, mean in zip(rounds.tolist(), means.tolist(), strict=True):
            self.round_loss.setdefault(int(r), float(mean))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "round_loss": [[r, m] for r, m in self.round_loss.items()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        # Absent from checkpoints written before pow-d: rebuilt from the ledger then.
        self.round_loss = {int(r): float(m) for r, m in state.get("round_loss", [])}
