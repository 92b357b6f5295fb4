"""Plain many-round federated learning (FedAvg, McMahan et al. 2017).

Every device holds a fixed partition of the pool and trains on all of it in
each round it is picked. Rounds follow each other back to back on the
virtual clock; `day` is the round number so per-day reporting is per round.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

import numpy as np

from fedbench.data.source import Tensors
from fedbench.scenarios.base import RoundSpec, Scenario, positive_int
from fedbench.scenarios.context import DataContext
from fedbench.scenarios.pretrain import PretrainParams


class FederatedRounds(Scenario):
    def __init__(
        self, rounds: int, eval_every: int = 1, pretrain: PretrainParams | dict | None = None
    ) -> None:
        self.rounds = positive_int("scenario.rounds", rounds)
        self.eval_every = positive_int("scenario.eval_every", eval_every)
        self.pretrain = PretrainParams.from_config(pretrain)

    def schedule(self) -> Iterator[RoundSpec]:
        for r in range(1, self.rounds + 1):
            yield RoundSpec(r, r, 0.0, evaluate=r % self.eval_every == 0 or r == self.rounds)

    def expected_examples(self, ctx: DataContext, device_index: int) -> int:
        return int(ctx.sizes[device_index])

    def expected_examples_of(self, ctx: DataContext, devices: np.ndarray) -> np.ndarray:
        return np.asarray(ctx.sizes, dtype=float)[devices]

    def device_data(self, ctx: DataContext, device_index: int, day: int) -> Tensors:
        return ctx.splits.pool.subset(ctx.partitions[device_index])

    def data_key(self, device_index: int, day: int) -> Hashable:
        return device_index  # its fixed partition, every round
