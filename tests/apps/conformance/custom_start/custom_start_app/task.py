"""Data and model of the app: seeded digits and a tiny MLP, so every run trains the same numbers.

The first 600 of scikit-learn's digits are split among the nodes by `partition-id`
(every `num-partitions`-th image, 80/20 train/test); the last 297 are the server's
held-out set for centralized evaluation. Nothing is downloaded.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

CLIENT_SAMPLES = 600
SERVER_TEST_START = 1500
BATCH = 32


@lru_cache(maxsize=1)
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    return x, torch.tensor(digits.target, dtype=torch.long)


def partition(partition_id: int, num_partitions: int) -> tuple[torch.Tensor, ...]:
    """This node's (x_train, y_train, x_test, y_test)."""
    x, y = _digits()
    index = np.arange(partition_id, CLIENT_SAMPLES, num_partitions)
    cut = int(0.8 * len(index))
    return x[index[:cut]], y[index[:cut]], x[index[cut:]], y[index[cut:]]


def server_testset() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _digits()
    return x[SERVER_TEST_START:], y[SERVER_TEST_START:]


def make_net(seed: int) -> nn.Module:
    """The global model's initial weights come from `seed` alone."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def train(
    net: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, seed: int
) -> tuple[float, float]:
    """SGD on (x, y); returns (mean batch loss, train accuracy).

    One thread and a per-call seed make the float results independent of the
    process and the order in which a runtime happens to call the nodes.
    """
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    net.train()
    total, steps, correct = 0.0, 0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for start in range(0, len(y), BATCH):
            idx = order[start : start + BATCH]
            optimizer.zero_grad()
            logits = net(x[idx])
            loss = nn.functional.cross_entropy(logits, y[idx])
            loss.backward()
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
            correct += int((logits.argmax(1) == y[idx]).sum())
    return total / max(steps, 1), correct / max(epochs * len(y), 1)


def test(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(cross-entropy loss, accuracy) of `net` on (x, y)."""
    net.eval()
    with torch.no_grad():
        logits = net(x)
        loss = float(nn.functional.cross_entropy(logits, y))
        accuracy = float((logits.argmax(1) == y).float().mean())
    return loss, accuracy
