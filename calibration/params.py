"""The emulator's shared constants as a parameter vector: what is fitted, what is fixed, and why.

Every constant of fedbench/devices/fitted_constants.yaml is either a `Param`
(fitted by calibration/fit.py, with a log-normal prior: its centre is the
physical guess, its sigma how sure we are) or in `FIXED` (set from a source
or a measurement on this host, because no published row identifies it).
`identified_by` says which rows carry the information; report.md lists it
with the fitted value.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbench.devices.constants import Constants, load_arch_table, parse_fitted

CPU_FRAMEWORKS = ("mnn", "pytorch")
# The calibration models with pools (3x3 max pools; GoogLeNet's inception
# pool branches are stride 1). The priors of the per-output cycles of pools
# (20) and norms (2) are what PyTorch's kernels take on the x86 test host
# (benchmarks/profile_device.py's kernel probes: pool x0.75, norm x0.6-1.5 of
# them); few rows carry them, so the report says where they stay at the prior.
POOLED = {"mnn": "GoogLeNet, AlexNet, SqueezeNet", "pytorch": "ResNets' stem max pool"}
# ... and with normalisation layers.
NORMED = {"mnn": "MobileNetV2", "pytorch": "ResNets, MobileNets, EfficientNet, ViT"}
# Forward k x k convolutions at Winograd speed: PyTorch's training steps; MNN
# runs them so only in inference (constant weights), which no fitted row times.
WINOGRAD = {
    "mnn": "none: MNN trains its convolutions as im2col + MatMul (inference only)",
    "pytorch": "PyTorch rows (RPi 4, RPi 5): NNPACK's F(6x6, 3x3) on stride-1 3x3 convs",
}

# Prior centres of the fixed host work per step, Mcycles. MNN's is measured with
# MNN itself (benchmarks/mnn_overhead.py, benchmarks/results/mnn_overhead.txt):
# on this host the line through chains of 1-8 layers leaves 0.2-0.35 Mcycles per
# step that no call accounts for (1 and 2 threads, runs on two days; a one-layer
# chain's whole step, its 16 calls included, is 0.8-1.1 Mcycles), and its 28-56
# kcycles per call (this VM ran a third faster on the second day) bracket the
# dispatch priors (50). Only LeNet's millisecond steps show this constant
# among the rows, so a fit without LeNet predicts it from this centre. PyTorch's
# stays a guess: no row moves it (its steps take seconds).
STEP_OVERHEAD = {"mnn": 0.3, "pytorch": 10.0}
# (Before the measurement MNN's centre was the same 10 Mcycles guess; LeNet held
# out then came out 23-65% slow at every batch of the fixed-clock session.)


@dataclass(frozen=True)
class Param:
    path: str  # dotted path in fitted_constants.yaml
    guess: float  # prior centre
    lower: float
    upper: float
    sigma: float  # prior width in ln units
    identified_by: str


def _cpu_params(fw: str) -> list[Param]:
    at = f"cpu.{fw}"
    rows = "MNN rows (Meizu 16T, Xiaomi MI 9)" if fw == "mnn" else "PyTorch rows (RPi 4, RPi 5)"
    out = [
        Param(f"{at}.forward.gemm_eff", 0.5, 1e-3, 4.0, 1.0, f"{rows}: forward of conv nets"),
        Param(f"{at}.backward.gemm_eff", 0.4, 1e-3, 4.0, 1.0, f"{rows}: training steps"),
        Param(f"{at}.forward.depthwise_eff", 0.1, 1e-4, 2.0, 1.5, f"{rows}: MobileNets"),
        Param(f"{at}.backward.depthwise_eff", 0.05, 1e-4, 2.0, 1.5, f"{rows}: MobileNets"),
        Param(f"{at}.forward.dispatch_kcycles", 50.0, 0.1, 1e4, 1.5, f"{rows}: LeNet, batch 1"),
        Param(f"{at}.backward.dispatch_kcycles", 50.0, 0.1, 1e4, 1.5, f"{rows}: LeNet, batch 1"),
        Param(f"{at}.optimizer.dispatch_kcycles", 50.0, 0.1, 1e4, 1.5, "many-tensor models"),
        Param(f"{at}.forward.unfold_conv", 1.0, 1e-3, 20.0, 1.0, f"{rows}: strided convs"),
        Param(f"{at}.backward.unfold_conv", 1.0, 1e-3, 20.0, 1.0, f"{rows}: k x k convs"),
        Param(f"{at}.forward.unfold_depthwise", 1.0, 1e-3, 20.0, 1.0, f"{rows}: MobileNets"),
        Param(f"{at}.backward.unfold_depthwise", 1.0, 1e-3, 20.0, 1.0, f"{rows}: MobileNets"),
        Param(f"{at}.forward.repack_weights", 1.0, 1e-3, 50.0, 1.0, f"{rows}: batch-1 steps"),
        Param(f"{at}.backward.repack_weights", 1.0, 1e-3, 50.0, 1.0, f"{rows}: batch-1 steps"),
        Param(f"{at}.winograd_speedup", 1.5, 1.0, 6.0, 1.0, WINOGRAD[fw]),
        Param(f"{at}.pool_cycles_per_output", 20.0, 0.01, 1e4, 1.5, f"{rows}: {POOLED[fw]}"),
        Param(f"{at}.norm_cycles_per_output", 2.0, 0.01, 1e4, 1.5, f"{rows}: {NORMED[fw]}"),
        # Prior 1.6: a training batch norm's forward reads its input twice and
        # writes once (3 operand passes where the call's bytes count 2), its
        # backward reads input and gradient twice and writes once (5 vs 3).
        Param(f"{at}.norm_passes", 1.6, 1.0, 8.0, 0.3, f"{rows}: {NORMED[fw]}"),
        Param(f"{at}.narrow_half", 16.0, 0.1, 1e3, 1.5, f"{rows}: thin GEMMs (SqueezeNet)"),
        Param(f"{at}.cache_bytes_per_cycle", 8.0, 0.3, 64.0, 1.0, f"{rows}: elementwise"),
        Param(f"{at}.dram_eff", 0.5, 0.01, 1.0, 1.0, f"{rows}: large activations"),
        Param(
            f"{at}.step_overhead_mcycles",
            STEP_OVERHEAD[fw],
            0.01,
            1e4,
            1.5,
            f"{rows}: " + ("LeNet" if fw == "mnn" else "small models"),
        ),
    ]
    if fw == "pytorch":
        out.append(Param(f"{at}.input_cycles_per_byte", 10.0, 0.01, 1e4, 1.5, "RPi fine-tune rows"))
        # Prior 1.5, as wide as the other efficiencies (sigma 1): a BLAS SGEMM over
        # batch x tokens rows against slow_conv2d's GEMM per image with its
        # panels re-packed each time (constants.CpuFramework.matmul_speedup).
        out.append(
            Param(f"{at}.matmul_speedup", 1.5, 0.25, 6.0, 1.0, f"{rows}: ViT (linear layers)")
        )
    else:
        out += [
            Param(f"{at}.runtime_mb", 60.0, 1.0, 2000.0, 1.0, "Meizu RES of LeNet rows"),
            Param(f"{at}.rss_per_tensor_byte", 2.5, 1.0, 20.0, 1.0, "Meizu RES vs tensors"),
            Param(f"{at}.rss_per_unfold_byte", 1.0, 1e-3, 20.0, 1.0, "Meizu RES vs im2col"),
            Param(f"{at}.rss_per_output_byte", 0.5, 1e-3, 20.0, 1.0, "Meizu RES vs outputs"),
            Param(f"{at}.fault_cycles_per_kb", 400.0, 1.0, 1e5, 1.5, f"{rows}: batch sweeps"),
        ]
    return out


PARAMS: tuple[Param, ...] = (
    *_cpu_params("mnn"),
    *_cpu_params("pytorch"),
    Param("shared.parallel_half_outputs", 4e4, 10.0, 1e8, 2.0, "batch sweeps (1 -> 32)"),
    Param("shared.cache_share", 1.0, 0.05, 8.0, 1.0, "batch sweeps (activations outgrow LLC)"),
    Param("shared.phone_sustained_clock", 0.8, 0.3, 1.0, 0.5, "Meizu big-core, Xiaomi rows"),
    Param("shared.swap_efficiency", 0.2, 1e-4, 1.0, 2.0, "MNN SqueezeNet batch-32 rows"),
    Param("gpu.tensorflow.gemm_eff", 0.5, 1e-3, 2.0, 1.0, "TX2 GPU ResNet50 batch 64"),
    Param("gpu.tensorflow.elementwise_eff", 0.3, 1e-3, 1.0, 1.0, "TX2 GPU DenseNet40 batch 64"),
    Param("gpu.tensorflow.launch_us", 20.0, 0.1, 1e4, 1.5, "TX2 GPU batch-4 rows"),
    Param("gpu.tensorflow.occupancy_half_per_lane", 64.0, 0.1, 1e5, 1.5, "TX2 GPU batch 4 vs 64"),
    Param("gpu.tensorflow.dispatch_kcycles", 150.0, 1.0, 1e5, 1.5, "TX2 GPU deep-RL rows"),
    Param(
        "gpu.tensorflow.transform_eff",
        0.1,
        1e-4,
        1.0,
        1.5,
        "TX2 GPU ResNet50 (25M parameters) vs DenseNet40 (1M)",
    ),
)

# Not identifiable from the published rows: set from a source or a
# measurement, never tuned to the rows (calibration/report.md says so).
FIXED: dict[str, tuple[float, str]] = {
    "cpu.mnn.matmul_speedup": (
        1.0,
        "MNN runs inner-product (linear) layers as 1x1 convolutions through the same "
        "packed GEMM kernels as its other convolutions",
    ),
    "cpu.mnn.input_cycles_per_byte": (
        0.0,
        "MNN's benchmark times sgd->step() only; data loading is outside the timed region",
    ),
    "cpu.pytorch.runtime_mb": (
        230.0,
        "measured on this host: resident set after importing torch and fedbench (no "
        "published PyTorch RSS)",
    ),
    "cpu.pytorch.rss_per_tensor_byte": (
        1.1,
        "benchmarks/memory_prediction.py: PyTorch's allocator peak within ~15% of the "
        "tensor peak on this host",
    ),
    "cpu.pytorch.rss_per_unfold_byte": (
        0.0,
        "PyTorch's CPU convolution frees its im2col buffer when the call returns",
    ),
    "cpu.pytorch.fault_cycles_per_kb": (
        0.0,
        "not identified: the PyTorch rows have no batch sweep to separate it from the kernels",
    ),
    "cpu.pytorch.rss_per_output_byte": (
        0.0,
        "PyTorch frees every forward output autograd does not save (counted in the tensor peak)",
    ),
    "shared.elementwise_eff": (0.25, "elementwise calls are bandwidth-bound: rarely binds"),
    "gpu.tensorflow.depthwise_eff": (
        0.05,
        "no depthwise model among the GPU rows: MNN/PyTorch CPU ratio of depthwise to GEMM",
    ),
    "gpu.tensorflow.narrow_half": (32.0, "one warp (32 lanes) per GEMM tile row"),
    "gpu.tensorflow.transfer_fraction": (
        0.0,
        "a Jetson's GPU shares the DRAM with the CPU: CUDA tensors stay where they are "
        "(only the input batch is copied, at copy_gbs)",
    ),
    "gpu.tensorflow.filter_transform_passes": (
        2.0,
        "TensorFlow's conv_ops.cc: filters stay HWIO, cuDNN takes OIHW, so TransformFilter "
        "reads and writes the filter before every forward and input-gradient call, and the "
        "filter gradient is transformed back after every filter-gradient call",
    ),
    "gpu.tensorflow.overlap": (
        1.0,
        "TensorFlow issues kernels to CUDA streams asynchronously: the host dispatches the "
        "next op while the GPU runs this one",
    ),
    "gpu.tensorflow.sync_us": (
        0.0,
        "no per-op synchronisation: TensorFlow waits on the stream once per step (session.run)",
    ),
    "gpu.tensorflow.runtime_mb": (
        600.0,
        "estimate: TensorFlow 1.x with its CUDA context and cuDNN on L4T (no published RSS)",
    ),
    "gpu.tensorflow.rss_per_tensor_byte": (1.5, "estimate: TensorFlow's BFC allocator slack"),
}
for _fw in CPU_FRAMEWORKS:
    for _kind in ("gemm_eff", "depthwise_eff"):
        FIXED[f"cpu.{_fw}.optimizer.{_kind}"] = (0.3, "the update has no GEMM-shaped calls")
# Mobile GPUs: paper 003's and paper 001's figures are not training rows of a
# named model, so the OpenCL stack is set from them (derived in fit.py), and
# checked - not cross-validated - against paper 001's GPU/CPU ratio.
MNN_OPENCL_SOURCES: dict[str, str] = {
    "gemm_eff": "paper 003: optimised OpenCL kernels reach 40-70 GFLOP/s on Snapdragon 8 "
    "series GPUs (Adreno 640: 898.5 GFLOP/s peak) -> 55 / 898.5",
    "depthwise_eff": "same ratio to gemm_eff as MNN's CPU kernels (no GPU figure)",
    "elementwise_eff": "estimate: an OpenCL image pipeline at a fifth of DRAM bandwidth",
    "narrow_half": "0: MNN's OpenCL convolutions give each work-item a block of outputs and "
    "loop over the thin dimension inside it (conv_2d.cl: 4 output channels x 4 pixels per "
    "work-item, a loop over input-channel blocks; conv2d_backprop.cl: a work-item per 4x4 "
    "channel block and tap, a loop over batch and pixels), so a thin GEMM idles no lanes; "
    "few outputs do, which occupancy_half_per_lane charges (was 32, an estimate)",
    "occupancy_half_per_lane": "estimate: MNN's OpenCL convolution kernels write 4 channels x 4 "
    "pixels per work-item, so 16 outputs per lane is one work-item per ALU: half the Adreno "
    "640's 768 lanes busy (the TX2 fit's 124 would leave a 100k-output GEMM at half speed)",
    "launch_us": "estimate: OpenCL kernel enqueue on Android, tens of microseconds",
    "dispatch_kcycles": "MNN's own per-call host work (the CPU's forward dispatch)",
    "transfer_fraction": "paper 003: OpenCL buffers/images are mapped per op, each operand "
    "copied in and out (2 passes)",
    "copy_eff": "paper 003: data movement is ~91% of GPU training time; solved for "
    "MobileNetV2 at batch 8 on the Meizu 16T's Adreno 640",
    "runtime_mb": "MNN's CPU runtime_mb plus ~40 MB of OpenCL driver (estimate)",
    "rss_per_tensor_byte": "MNN's CPU value",
    "overlap": "MNN's training executor evaluates the graph op by op and maps each result "
    "back before the next op runs (Express lazy evaluation): host work and GPU work add up",
    "sync_us": "estimate: an OpenCL clFinish / map round trip on an Android GPU driver, tens "
    "of microseconds per op",
}


@dataclass(frozen=True)
class EnergyParam:
    """A power-model constant, fitted to the energy rows after the time constants."""

    path: str
    guess: float
    lower: float
    upper: float
    sigma: float
    identified_by: str


# The power model is linear in these given the step's times, so they are
# fitted in a second stage on the rows' whole-device power (fit.py).
ENERGY_PARAMS: tuple[EnergyParam, ...] = (
    EnergyParam(
        "shared.core_power_scale",
        1.0,
        0.1,
        10.0,
        0.5,
        "Meizu 16T power during training: compute-bound models (GoogLeNet, SqueezeNet)",
    ),
    EnergyParam(
        "shared.dram_energy_scale",
        1.0,
        0.1,
        100.0,
        1.5,
        "Meizu 16T power during training: DRAM-heavy steps (AlexNet's FC weights, large batches)",
    ),
)


def energy_guesses() -> np.ndarray:
    return np.array([p.guess for p in ENERGY_PARAMS])


def guesses() -> np.ndarray:
    return np.array([p.guess for p in PARAMS])


def _set(tree: dict[str, Any], path: str, value: float) -> None:
    keys = path.split(".")
    node = tree
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = float(value)


def tree_of(
    values: np.ndarray,
    mnn_opencl: dict[str, float],
    meta: dict[str, str],
    energy: np.ndarray | None = None,
) -> dict:
    """fitted_constants.yaml as a nested mapping."""
    tree: dict[str, Any] = {}
    for path, (v, _) in FIXED.items():
        _set(tree, path, v)
    for p, v in zip(PARAMS, values, strict=True):
        _set(tree, p.path, float(v))
    scales = energy_guesses() if energy is None else energy
    for e, v in zip(ENERGY_PARAMS, scales, strict=True):
        _set(tree, e.path, float(v))
    for key, v in mnn_opencl.items():
        _set(tree, f"gpu.mnn_opencl.{key}", v)
    tree["fit"] = meta
    return _ordered(tree)


def _ordered(tree: dict[str, Any]) -> dict[str, Any]:
    order = ("cpu", "gpu", "shared", "fit")
    return {k: tree[k] for k in order if k in tree}


def constants_of(
    values: np.ndarray, mnn_opencl: dict[str, float], energy: np.ndarray | None = None
) -> Constants:
    tree = copy.deepcopy(tree_of(values, mnn_opencl, {}, energy))
    return Constants(load_arch_table(), parse_fitted(tree, "<fit>"))
