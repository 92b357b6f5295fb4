"""FedRolex (Alam, Liu, Yan and Zhang, "FedRolex: Model-Heterogeneous Federated
Learning with Rolling Sub-Model Extraction", NeurIPS 2022).

Each device trains ceil(r * C) consecutive channels of every hidden layer,
r its largest affordable rate, in a window that starts one channel further
every round (mod C), so over C rounds every channel of the global model is
trained by every device's width (the paper's window advances one index per
round, as here). Clients send the trained submodel, `num-examples` and
`model-rate`.

How fedbench's version differs from the paper, and why (docs/baselines.md):
HeteroFL's list (fedbench.algorithms.heterofl: sBN on the server's split, no
Scaler, weighting by examples, the rate from predicted costs), on which
FedRolex's code is built; and the per-rate scores (`accuracy@r0.5`) are of
the first window, the one a device would deploy, where the paper reports the
global model's accuracy (fedbench's `accuracy`).
"""

from __future__ import annotations

from fedbench.algorithms.submodels import SubmodelStrategy
from fedbench.models.width import Extraction


class FedRolex(SubmodelStrategy):
    """Rolling submodels: the window of channels moves one channel a round."""

    def extraction(self, server_round: int) -> Extraction:
        return Extraction("rolling", offset=max(server_round - 1, 0))
