"""Daily incremental fine-tuning (paper 000, Liu et al., "Performance Analysis
and Characterization of Training Deep Learning Models on Mobile Devices").

A model pretrained on the server is fine-tuned on the devices with the few
dozen new samples each collects per day, day after day. Each day's rounds
start at `start_hour` of that virtual day (e.g. 02:00, phones charging).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from fedbench.data.source import Tensors
from fedbench.data.stream import DailyStream
from fedbench.errors import FedbenchError
from fedbench.scenarios.base import MAX_ROUNDS, RoundSpec, Scenario, positive_int
from fedbench.scenarios.context import DataContext
from fedbench.scenarios.pretrain import PretrainParams

DAY_S = 86_400.0


class DailyScenario(Scenario):
    unit = "day"

    def __init__(
        self,
        days: int,
        new_samples_per_day: int,
        rounds_per_day: int = 1,
        replay_days: int = 0,
        start_hour: float = 2.0,
        pretrain: PretrainParams | dict | None = None,
    ) -> None:
        self.days = positive_int("scenario.days", days)
        self.new_samples_per_day = positive_int("scenario.new_samples_per_day", new_samples_per_day)
        self.rounds_per_day = positive_int("scenario.rounds_per_day", rounds_per_day, 10_000)
        if self.days * self.rounds_per_day > MAX_ROUNDS:
            raise FedbenchError(
                f"scenario: {self.days} days x {self.rounds_per_day} rounds a day is more than "
                f"{MAX_ROUNDS:,} rounds"
            )
        if isinstance(replay_days, bool) or not isinstance(replay_days, int) or replay_days < 0:
            raise FedbenchError(
                f"scenario.replay_days must be an integer >= 0, got {replay_days!r}"
            )
        if replay_days >= self.days and replay_days > 0:
            raise FedbenchError(
                f"scenario.replay_days={replay_days}: at most scenario.days - 1 = {self.days - 1} "
                "(only earlier days can be replayed)"
            )
        self.replay_days = replay_days
        if isinstance(start_hour, bool) or not isinstance(start_hour, (int, float)):
            raise FedbenchError(
                f"scenario.start_hour must be a number of hours in [0, 24), got {start_hour!r}"
            )
        if not 0.0 <= float(start_hour) < 24.0:
            raise FedbenchError(f"scenario.start_hour must be in [0, 24), got {start_hour!r}")
        self.start_hour = float(start_hour)
        self.pretrain = PretrainParams.from_config(pretrain)

    def schedule(self) -> Iterator[RoundSpec]:
        number = 0
        for day in range(1, self.days + 1):
            for r in range(self.rounds_per_day):
                number += 1
                start = (day - 1) * DAY_S + self.start_hour * 3600.0 if r == 0 else 0.0
                yield RoundSpec(number, day, start, evaluate=r == self.rounds_per_day - 1)

    def expected_examples(self, ctx: DataContext, device_index: int) -> int:
        # A steady-state day: today's samples plus the replay buffer, full.
        return self.new_samples_per_day * (1 + self.replay_days)

    def device_data(self, ctx: DataContext, device_index: int, day: int) -> Tensors:
        stream = DailyStream(
            ctx.splits.pool,
            ctx.partitions[device_index],
            self.new_samples_per_day,
            seed=ctx.seed * 1_000_003 + device_index,
            augment=ctx.augment,
        )
        today = stream.day(day)
        if self.replay_days == 0 or day == 1:
            return today
        earlier = stream.replay(day, self.replay_days)
        return Tensors(torch.cat([today.x, earlier.x]), torch.cat([today.y, earlier.y]))
