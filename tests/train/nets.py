"""Small models for the memory planner tests: with and without BatchNorm."""

from __future__ import annotations

import torch
from torch import nn


class Trunked(nn.Module):
    """A Sequential trunk (what checkpointing segments) plus a head outside it."""

    def __init__(self, norm: bool, dropout: float = 0.0, width: int = 8) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 3, padding=1)]
        for _ in range(5):
            layers += [nn.BatchNorm2d(width) if norm else nn.Identity(), nn.Tanh()]
            layers += [nn.Dropout(dropout) if dropout else nn.Identity()]
            layers.append(nn.Conv2d(width, width, 3, padding=1))
        layers += [nn.AdaptiveAvgPool2d(2), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(4 * width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def sequential_net() -> nn.Sequential:
    """A model that is itself one Sequential (checkpointing wraps the whole model)."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.Tanh(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )


def batch(n: int, size: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, size, size, generator=gen), torch.randint(0, 10, (n,), generator=gen)
