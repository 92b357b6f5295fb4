"""FedProx's client half (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys'20).

The server half is Flower's (`flwr.serverapp.strategy.FedProx`, fedbench/conf/algorithm/
fedprox.yaml): FedAvg that sends `proximal-mu` in every train config. The
client adds mu/2 ||w - w_global||^2 to its local objective, i.e. the
gradient mu (w - w_global) to every parameter's gradient before each
optimizer step - exact however the step is split into micro-batches.
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import ClientHalf, client_half


@client_half
class Proximal(ClientHalf):
    key = "proximal-mu"
    batchable = True

    def __init__(self, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise self.malformed(value, "a number >= 0")
        super().__init__(value)
        self.mu = float(value)

    def corrects(self) -> bool:
        return self.mu > 0

    def correct(self, grad: torch.Tensor, weight: torch.Tensor, anchor: torch.Tensor) -> None:
        # In place, no temporaries: batched training passes all devices' stacked weights.
        grad.add_(weight, alpha=self.mu).sub_(anchor, alpha=self.mu)
