"""The Nature DQN Q-network (Mnih et al., "Human-level control through deep RL", 2015).

Four stacked 84x84 grey frames in, one Q-value per action out: conv 8x8/4
(32), 4x4/2 (64), 3x3/1 (64), a 512-unit hidden layer: 1,693,362 parameters
with the full 18-action Atari set. A DQN update also runs the target network
forward on the next states (no backward); that extra inference is not part
of this module's step.
"""

from __future__ import annotations

from torch import Tensor, nn


class DQN(nn.Module):
    def __init__(self, num_actions: int = 18, in_channels: int = 4, hidden: int = 512) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, 4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, 1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(64 * 7 * 7, hidden), nn.ReLU(), nn.Linear(hidden, num_actions)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
