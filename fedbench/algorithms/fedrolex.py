"""FedRolex (Alam, Liu, Yan and Zhang, "FedRolex: Model-Heterogeneous Federated
Learning with Rolling Sub-Model Extraction", NeurIPS 2022).

Each device trains ceil(r * C) consecutive channels of every hidden layer,
r its largest affordable rate, in a window that starts one channel further
every round (mod C), so over C rounds every channel of the global model is
trained by every device's width. Clients send the trained submodel,
`num-examples` and `model-rate`.
"""

from __future__ import annotations

from fedbench.algorithms.submodels import SubmodelStrategy
from fedbench.models.width import Extraction


class FedRolex(SubmodelStrategy):
    """Rolling submodels: the window of channels moves one channel a round."""

    def extraction(self, server_round: int) -> Extraction:
        return Extraction("rolling", offset=max(server_round - 1, 0))
