"""The ranges Flower's strategies do not check themselves, from their papers.

Flower builds `FedAdam(eta=0)` or `Krum(num_malicious_nodes=10)` for a
3-device round without a word, and the run then trains nothing or
aggregates by a rule whose guarantee no longer holds. Each entry below is
one Flower strategy class (subclasses included: FedAdam, FedYogi and
FedAdagrad are FedOpt) and the check its parameters need; preflight and the
server run them once the strategy is built, with the devices a round picks.
(FedTrimmedAvg checks its `beta` itself.)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from flwr.serverapp.strategy import FedAvgM, FedProx, MultiKrum, Strategy
from flwr.serverapp.strategy.fedopt import FedOpt

from fedbench.errors import FedbenchError


def _number(strategy: Strategy, key: str, low: float, high: float, why: str) -> None:
    """`low < value < high`."""
    _in_range(strategy, key, low, high, why, low_open=True)


def _fraction(strategy: Strategy, key: str, high: float, why: str) -> None:
    """`0 <= value < high`."""
    _in_range(strategy, key, 0.0, high, why, low_open=False)


def _in_range(
    strategy: Strategy, key: str, low: float, high: float, why: str, *, low_open: bool
) -> None:
    value = getattr(strategy, key, None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return  # typed by the class's signature already
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value >= high:
        if math.isinf(high):
            valid = f"{'>' if low_open else '>='} {low:g}"
        else:
            valid = f"in {'(' if low_open else '['}{low:g}, {high:g})"
        raise FedbenchError(f"algorithm.{key}={value!r}: must be {valid} ({why})")


def _fedopt(strategy: Strategy, picked: int) -> None:
    """Reddi et al., ICLR'21: a server step eta > 0, moments' decay in [0, 1), tau > 0."""
    _number(strategy, "eta", 0, math.inf, "the server learning rate; 0 never moves the model")
    _number(strategy, "eta_l", 0, math.inf, "the client learning rate")
    for key in ("beta_1", "beta_2"):
        _fraction(strategy, key, 1, "a moment's decay; 1 or more never forgets, or diverges")
    _number(strategy, "tau", 0, math.inf, "the adaptivity, which keeps the step finite")


def _krum(strategy: Strategy, picked: int) -> None:
    """Blanchard et al., NeurIPS'17: Krum tolerates f malicious updates out of n > 2f + 2."""
    f = getattr(strategy, "num_malicious_nodes", 0)
    if isinstance(f, bool) or not isinstance(f, int) or f < 0:
        raise FedbenchError(f"algorithm.num_malicious_nodes={f!r}: must be an integer >= 0")
    if f > 0 and picked <= 2 * f + 2:
        most = max(0, (picked - 3) // 2)
        raise FedbenchError(
            f"algorithm.num_malicious_nodes={f}: Krum tolerates f malicious updates only when a "
            f"round has more than 2f + 2 = {2 * f + 2}, and a round picks {picked} "
            f"(strategy.clients_per_round); choose num_malicious_nodes <= {most} or pick at "
            f"least {2 * f + 3} devices a round"
        )


def _fedavgm(strategy: Strategy, picked: int) -> None:
    _number(strategy, "server_learning_rate", 0, math.inf, "0 never moves the model")
    _fraction(strategy, "server_momentum", 1, "1 or more never forgets, or diverges")


def _fedprox(strategy: Strategy, picked: int) -> None:
    _fraction(strategy, "proximal_mu", math.inf, "the proximal term's weight")


CHECKS: tuple[tuple[type[Strategy], Callable[[Strategy, int], None]], ...] = (
    (FedOpt, _fedopt),
    (MultiKrum, _krum),
    (FedAvgM, _fedavgm),
    (FedProx, _fedprox),
)


def check_parameters(strategy: Strategy, picked: int) -> None:
    """Refuse parameters outside their paper's range; `picked`: the devices of a round."""
    for kind, check in CHECKS:
        if isinstance(strategy, kind):
            check(strategy, picked)
