"""Resident memory of a training process, and what the device does when it does not fit.

The workload's peak counts training tensors (`Workload.peak_bytes`: what
the memory planner budgets against `memory.train_budget_mb`). The process
holds more: its runtime (interpreter, libraries, kernels' code and
buffers), what its allocator keeps around its tensors, and what a graph
executor keeps for the backward pass: MNN computes each k x k conv's
weight gradient on a full im2col of its input (an extra tensor of its
geometry pass that stays allocated with the graph) and holds every forward
call's output, not only what autograd would save, which is why its
resident set grows ~17x AlexNet's saved activations per sample but ~2x
MobileNetV2's (whose 1x1 and depthwise convs need no im2col). The peak
resident set (RSS) is

    rss_mb = runtime_mb + rss_per_tensor_byte x tensor_peak_mb
                        + rss_per_unfold_byte x forward_im2col_mb
                        + rss_per_output_byte x forward_outputs_mb

per framework (fitted_constants.yaml; MNN's fitted to the rows' `top`
RES; 0 for PyTorch, which frees both). Beyond what the
device lets the process keep resident (`memory.available_mb`) the kernel
reclaims the excess and pages it back every step - the MNN SqueezeNet run
at batch 32 on the Meizu 16T (4.3 GB resident) took 5.6x its batch-16
time - so each step pays

    swap_s = 2 x excess / (swap_gbs x swap_efficiency)

(out and back in, at the swap device's throughput times the share page
reclaim reaches while thrashing); beyond available + swap it cannot run
(`oom`).
"""

from __future__ import annotations

import numpy as np

from fedbench.core.workload import Workload
from fedbench.devices.constants import CpuFramework, GpuFramework, Shared
from fedbench.devices.kernels import FORWARD, GEMM_KINDS
from fedbench.devices.profile import DeviceProfile

MB = float(1 << 20)


def forward_unfold_bytes(workload: Workload) -> float:
    """im2col bytes of one micro-batch's forward GEMM-shaped convolutions (0 without calls).

    One micro-batch's: the graph of a micro-batch is what is alive at once
    (the call table holds every micro-batch of the step).
    """
    c = workload.calls
    if c is None:
        return 0.0
    kind, phase = np.asarray(c.kind), np.asarray(c.phase)
    mask = np.isin(kind, GEMM_KINDS) & (phase == FORWARD)
    total = float(np.asarray(c.unfold, dtype=float)[mask].sum())
    return total / max(1, workload.steps_per_update)


def forward_output_bytes(workload: Workload) -> float:
    """Bytes one micro-batch's forward calls write (0 without a call table)."""
    c = workload.calls
    if c is None:
        return 0.0
    forward = np.asarray(c.phase) == FORWARD
    elements = float(np.asarray(c.outputs, dtype=float)[forward].sum())
    # The model's own element size (4 for fp32 training).
    per_step = elements * workload.param_bytes / max(1, workload.num_params)
    return per_step / max(1, workload.steps_per_update)


def resident_terms(workload: Workload, fw: CpuFramework | GpuFramework) -> dict[str, float]:
    """The peak resident set's terms, MB (the bench's breakdown; they sum to `resident_mb`)."""
    tensors = workload.peak_bytes / MB
    return {
        "runtime": fw.runtime_mb,
        "tensors": tensors,
        "allocator": (fw.rss_per_tensor_byte - 1.0) * tensors,
        "kept_im2col": fw.rss_per_unfold_byte * forward_unfold_bytes(workload) / MB,
        "kept_outputs": fw.rss_per_output_byte * forward_output_bytes(workload) / MB,
    }


def resident_mb(workload: Workload, fw: CpuFramework | GpuFramework) -> float:
    """Peak resident set of the training process, MB."""
    return sum(resident_terms(workload, fw).values())


def fault_seconds(rss_mb: float, fw: CpuFramework, main_ghz: float) -> float:
    """Faulting in what a step of resident set `rss_mb` allocates afresh (all but the runtime)."""
    fresh_kb = (rss_mb - fw.runtime_mb) * 1024.0
    return fresh_kb * fw.fault_cycles_per_kb / (main_ghz * 1e9)


def excess_mb(profile: DeviceProfile, rss_mb: float) -> float:
    """Resident set the device cannot keep resident, MB."""
    return max(0.0, rss_mb - profile.memory.resident_mb)


def fits(profile: DeviceProfile, rss_mb: float) -> bool:
    """Whether a process of this resident set can run at all (resident + swap)."""
    return excess_mb(profile, rss_mb) <= profile.memory.swap_mb


def swap_seconds(profile: DeviceProfile, rss_mb: float, shared: Shared) -> float:
    """Paging per step of resident set `rss_mb`: the excess out and back in."""
    excess = excess_mb(profile, rss_mb)
    if excess <= 0.0:
        return 0.0
    rate = profile.memory.swap_gbs * shared.swap_efficiency * 1e9
    return 2.0 * excess * MB / rate
