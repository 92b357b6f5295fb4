"""FedAvg of torch state dicts, for the plain-torch baselines of the benchmarks.

fedbench's runs aggregate with the Flower strategy; the bare loops the
benchmarks measure against average in plain torch, the same way, here.
"""

from __future__ import annotations

import torch


def weighted_state(
    updates: list[dict[str, torch.Tensor]], sizes: list[int]
) -> dict[str, torch.Tensor]:
    """Each tensor averaged over `updates`, weighted by `sizes`, in float64, back in its dtype."""
    total = sum(sizes)
    return {
        k: sum(u[k].double() * (n / total) for u, n in zip(updates, sizes, strict=True)).to(  # type: ignore[union-attr]
            updates[0][k].dtype
        )
        for k in updates[0]
    }
