"""Model, data and training of the app, written the way Flower's quickstart-pytorch is."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn


class Net(nn.Module):
    """A small MLP on 8x8 digits; `hidden` sets its size."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def load_data(partition_id: int, num_partitions: int) -> tuple[torch.Tensor, ...]:
    """This node's share of the digits (every num_partitions-th image), 80/20 train/test."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    index = np.arange(partition_id, len(y), num_partitions)
    cut = int(0.8 * len(index))
    return x[index[:cut]], y[index[:cut]], x[index[cut:]], y[index[cut:]]


def train(net: Net, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, batch: int) -> float:
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    net.train()
    total, steps = 0.0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for start in range(0, len(y), batch):
            idx = order[start : start + batch]
            optimizer.zero_grad()
            loss = criterion(net(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += loss.item()
            steps += 1
    return total / max(steps, 1)


def test(net: Net, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    net.eval()
    with torch.no_grad():
        logits = net(x)
        loss = float(nn.functional.cross_entropy(logits, y))
        accuracy = float((logits.argmax(1) == y).float().mean())
    return loss, accuracy
