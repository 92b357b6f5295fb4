"""HeteroFL (Diao, Ding and Tarokh, "HeteroFL: Computation and Communication Efficient
Federated Learning for Heterogeneous Clients", ICLR 2021).

Each device trains a static width-scaled submodel: the first ceil(r * C)
channels of every hidden layer, r its largest affordable rate
(`rate_policy`, fedbench.algorithms.submodels.choose_rates), the same rate
every round. The server averages each parameter entry over the devices that
held it. Clients send the trained submodel, `num-examples` and `model-rate`
(fedbench's train handler does).
"""

from __future__ import annotations

from fedbench.algorithms.submodels import SubmodelStrategy


class HeteroFL(SubmodelStrategy):
    """Static submodels: the first channels, each device at its own largest rate."""
