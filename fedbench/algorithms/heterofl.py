"""HeteroFL (Diao, Ding and Tarokh, "HeteroFL: Computation and Communication Efficient
Federated Learning for Heterogeneous Clients", ICLR 2021).

Each device trains a static width-scaled submodel: the first ceil(r * C)
channels of every hidden layer, r its largest affordable rate
(`rate_policy`, fedbench.algorithms.submodels.choose_rates), the same rate
every round. The server averages each parameter entry over the devices that
held it. Clients send the trained submodel, `num-examples` and `model-rate`
(fedbench's train handler does).

How fedbench's version differs from the paper, and why (docs/baselines.md):

- static BN (sBN): the server re-estimates each width's BatchNorm statistics
  on its own split before scoring it (fedbench.server.submodels), instead of
  querying the clients after training, which fedbench's round loop has no
  stage for; clients still track running statistics (averaged per entry,
  used only where the server has no calibration data);
- no Scaler module (output / r in training): it needs a hook in every zoo
  model, and before BatchNorm in training it is cancelled by the batch
  normalisation, so it matters only for BN-free layers;
- entries are averaged weighted by num-examples (the authors' code counts
  each client once), and no classifier masking for label-split data;
- the level is each device's largest affordable rate from the emulator's
  predictions, not a fixed share of clients per level.
"""

from __future__ import annotations

from fedbench.algorithms.submodels import SubmodelStrategy


class HeteroFL(SubmodelStrategy):
    """Static submodels: the first channels, each device at its own largest rate."""
