"""FjORD (Horváth et al., "FjORD: Fair and Accurate Federated Learning under
Heterogeneous Targets with Ordered Dropout", NeurIPS 2021).

Ordered dropout: every round each device trains the first p-fraction of
every hidden layer's channels, p drawn uniformly from the rates it can
afford (`algorithm.rates` up to its largest rate from `rate_policy`), so
the narrow prefix of the network is trained by everyone and the wide tail by
the strong devices. The draw is seeded by (round, device): a rerun sends the
same widths. The paper samples p per local batch; fedbench samples once per
round (one submodel per message). Clients send the trained submodel,
`num-examples` and `model-rate`.
"""

from __future__ import annotations

import numpy as np

from fedbench.algorithms.submodels import SubmodelStrategy


class FjORD(SubmodelStrategy):
    """Ordered dropout: the first p-fraction of channels, p drawn per device and round."""

    def round_rate(self, server_round: int, device: int) -> float:
        top = float(self.device_rates[device])
        allowed = [r for r in self.rates if r <= top] or [top]
        rng = np.random.default_rng([server_round, device])
        return float(allowed[int(rng.integers(len(allowed)))])
