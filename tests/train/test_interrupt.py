"""A stop asked for (Ctrl-C / SIGTERM on the run's process) ends the server's pretraining at
the next epoch, not after all of them (fedbench.core.interrupt)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.core import interrupt
from fedbench.data.source import Tensors
from fedbench.train.loop import TrainParams, train_local


def test_training_stops_at_the_epoch_after_a_stop_is_asked() -> None:
    data = Tensors(torch.randn(16, 1, 4, 4), torch.randint(0, 2, (16,)))
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 2))
    params = TrainParams(batch_size=8, local_epochs=50, lr=0.1, momentum=0.0, weight_decay=0.0)
    epochs: list[int] = []

    def on_epoch(epoch: int, loss: float) -> None:
        epochs.append(epoch)
        if epoch == 2:
            interrupt.request("SIGINT received")

    try:
        with pytest.raises(interrupt.RunInterrupted, match="SIGINT received"):
            train_local(model, data, params, seed=0, on_epoch=on_epoch)
    finally:
        interrupt.clear()
    assert epochs == [1, 2]
    train_local(model, data, params, seed=0)  # nothing asked: all 50 epochs run
