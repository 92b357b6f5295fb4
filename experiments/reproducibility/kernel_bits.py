"""How far one training step's gradient moves with threads, ATen ISA and oneDNN ISA.

The smallest measurement of issue 31's sources: one forward and backward pass
of the headline model (DenseNet40) on one fixed random batch, at 1, 2 and 4
intra-op threads, in this process's ISA environment. It prints each
gradient's SHA-256 prefix and the largest difference to the 1-thread gradient
relative to the gradient's largest entry. Run it once per environment (the
variables must be set before torch loads) and compare the saved gradients:

    python experiments/reproducibility/kernel_bits.py --save /tmp/g_avx2.pt
    ATEN_CPU_CAPABILITY=default python experiments/reproducibility/kernel_bits.py \
        --save /tmp/g_default.pt --against /tmp/g_avx2.pt
    ONEDNN_MAX_CPU_ISA=SSE41 python experiments/reproducibility/kernel_bits.py \
        --save /tmp/g_sse41.pt --against /tmp/g_avx2.pt

Seconds on a 2-core host. Results: results/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import torch
from torch.nn import functional

from fedbench.core.numerics import environment
from fedbench.models.densenet import DenseNet

THREADS = (1, 2, 4)


def gradient(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Every parameter's gradient of one cross-entropy step, flattened into one vector."""
    model.zero_grad()
    functional.cross_entropy(model(x), y).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / a.abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", type=Path, help="write the 1-thread gradient here")
    parser.add_argument("--against", type=Path, help="compare with a gradient saved before")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = DenseNet(depth=40, growth_rate=12, num_classes=10).train()
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    print(environment())
    grads = {}
    for threads in THREADS:
        torch.set_num_threads(threads)
        grads[threads] = gradient(model, x, y)
        digest = hashlib.sha256(grads[threads].numpy().tobytes()).hexdigest()[:12]
        print(f"{threads} thread(s): gradient sha256 {digest}")
    for threads in THREADS[1:]:
        diff = relative(grads[1], grads[threads])
        print(f"1 vs {threads} threads: max relative difference {diff:.2e}")
    if args.against:
        other = torch.load(args.against, weights_only=True)
        diff = relative(other, grads[1])
        print(f"vs {args.against} (1 thread): max relative difference {diff:.2e}")
    if args.save:
        torch.save(grads[1], args.save)


if __name__ == "__main__":
    main()
