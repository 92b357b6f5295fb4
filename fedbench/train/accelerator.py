"""Where a worker's tensors live: the host's CPU or one of its GPUs (`runtime.accelerator`).

The host's accelerator changes how fast the host trains, never what a device
costs: an emulated device's latency, energy, memory, thermals and status come
from its profile and the workload, and the workload is measured on a CPU copy
of the model (fedbench.measure.step), so it is the same whatever the host
trains on.

Spellings: `auto` (CUDA when torch sees a GPU, else the CPU), `cpu`, `cuda`
(the process's current GPU) and `cuda:N` (GPU N of the host). The runtime
resolves the setting once for its workers and hands them the answer in
ACCELERATOR_ENV (a Ray worker sees only the GPU Ray gave it, as `cuda`), so
a worker never second-guesses the driver's choice.
"""

from __future__ import annotations

import math
import os
import re

import torch

from fedbench.errors import FedbenchError

KEY = "runtime.accelerator"
ACCELERATOR_ENV = "FEDBENCH_ACCELERATOR"  # the runtime's resolved choice, for its workers
VALID = "auto, cpu, cuda, cuda:N"
_SPELLING = re.compile(r"auto|cpu|cuda(:\d+)?")


def check(value: object, key: str = KEY) -> str:
    """The setting if it is spelled right; one line naming `key` otherwise."""
    if not isinstance(value, str) or not _SPELLING.fullmatch(value):
        raise FedbenchError(f"{key}={value!r}: valid: {VALID}")
    return value


def wants_cuda(value: str) -> bool:
    """Whether the setting insists on a GPU (`auto` does not)."""
    return value.startswith("cuda")


def gpu_index(value: str) -> int | None:
    """N of `cuda:N`; None for every other setting."""
    return int(value.split(":", 1)[1]) if ":" in value else None


def check_host(value: str, key: str = KEY) -> None:
    """Refuse a CUDA setting this host cannot honour, before anything starts."""
    check(value, key)
    if not wants_cuda(value):
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise FedbenchError(
            f"{key}={value}: torch sees no CUDA GPU on this host (torch {torch.__version__}); "
            "use auto or cpu"
        )
    index = gpu_index(value)
    if index is not None and index >= count:
        raise FedbenchError(
            f"{key}={value}: this host has {count} CUDA GPU(s); choose cuda:0..cuda:{count - 1}"
        )


def resolve(value: str) -> torch.device:
    """The torch device a setting means in this process (checked against this host)."""
    check(value)
    if value == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_host(value)
    if value == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(value)


def worker_device(setting: str) -> torch.device:
    """The device this worker trains on: the runtime's resolved choice, else `setting`."""
    return resolve(os.environ.get(ACCELERATOR_ENV) or setting)


def is_cuda_oom(exc: BaseException) -> bool:
    """The host's GPU ran out of memory (not the emulated device: that is the emulator's)."""
    return isinstance(exc, torch.cuda.OutOfMemoryError)


def free_bytes(device: torch.device) -> int | None:
    """Memory the GPU can still give this process; None on the CPU (no such limit here)."""
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    # What the caching allocator holds but is not using counts as free to us.
    reserved = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int(free + reserved)


def total_bytes(device: torch.device) -> int | None:
    """The GPU's memory; None on the CPU."""
    if device.type != "cuda":
        return None
    return int(torch.cuda.get_device_properties(device).total_memory)


def release(device: torch.device) -> None:
    """Give cached GPU blocks back after an out-of-memory error, so a retry can use them."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU timing without it times the launches)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def host_gpus() -> int:
    """CUDA GPUs torch sees in this process (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpu_share(setting: str, gpus: int, workers: int, per_worker: float | None) -> float:
    """The GPU fraction each Ray worker asks for: 0 when the workers train on the CPU.

    `gpus` is what the cluster has (after `cuda:N` narrowed it to one), and
    `per_worker` is `runtime.gpus_per_worker` (None: the GPUs shared evenly by
    the workers, so all of them run at once). `cpu`, and `auto` without a GPU,
    ask for none.
    """
    check(setting)
    if setting == "cpu" or gpus == 0:
        return 0.0
    if per_worker is not None:
        return float(per_worker)
    even = gpus / max(1, workers)
    # Ray keeps 4 decimal places of a fraction; rounding down keeps every worker seated.
    return min(1.0, math.floor(even * 10_000) / 10_000) or 0.0001


def describe(device: torch.device) -> str:
    """`cpu`, or `cuda:0 (NVIDIA H200)`: for logs and benchmark headers."""
    if device.type != "cuda":
        return str(device)
    return f"{device} ({torch.cuda.get_device_name(device)})"


def host_record(setting: str) -> dict[str, object]:
    """Where a run trained, for summary.json's provenance: the setting, what it resolves
    to in this process, torch's CUDA version and the host's GPUs (none: an empty list)."""
    gpus = [torch.cuda.get_device_name(i) for i in range(host_gpus())]
    try:
        device = describe(resolve(setting))
    except FedbenchError:  # a cluster's GPUs, not this host's (the runtime checked them)
        device = setting
    return {
        "accelerator": setting,
        "accelerator_device": device,
        "cuda": torch.version.cuda,
        "gpus": gpus,
    }
