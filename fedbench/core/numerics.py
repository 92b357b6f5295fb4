"""The numerical environment torch computes in: what changes a result's last bits.

The same seed gives the same weights only in the same environment. A
floating-point sum depends on its order, and the order depends on

- the intra-op thread count (each thread reduces its share, then the shares
  are added): fixed for the server's own work by `fixed_threads`;
- the instruction set the kernels were picked for: ATen's CPU capability
  (`DEFAULT`, `AVX2`, `AVX512`, ...; the `ATEN_CPU_CAPABILITY` variable can
  lower it) and oneDNN's (the convolutions; `ONEDNN_MAX_CPU_ISA` lowers it);
- the torch build (its kernels, its oneDNN and BLAS versions).

None of them is wrong; they are recorded (summary.json's provenance) and are
part of the pretrained model's cache key, so a cached model is never served
to an environment that would have computed another one. How far results may
drift between environments is stated, and tested, in docs/results.md.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch

# Environment variables that change which kernels run or how many threads they use.
NUMERIC_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS")


def _onednn_version() -> str | None:
    # torch exposes the oneDNN version only in its build summary.
    found = re.search(r"MKL-DNN (v[\d.]+)", torch.__config__.show())
    return found.group(1) if found and torch.backends.mkldnn.is_available() else None


def environment() -> dict[str, object]:
    """The torch build and instruction set level of this process (provenance, cache keys)."""
    return {
        "torch": torch.__version__,
        "torch_git": torch.version.git_version,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "onednn": _onednn_version(),
        "numeric_env": {k: os.environ[k] for k in NUMERIC_ENV if k in os.environ},
    }


@contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """torch's intra-op thread count set to `threads` inside, restored after.

    Fixed, a computation sums in the same order on a 2-core laptop and a
    64-core server (a count above the host's cores oversubscribes it: slower,
    the same sums).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def state_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """A model state's fingerprint: names, dtypes, shapes and every byte, in name order."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
