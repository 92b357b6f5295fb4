"""The emulator's shared constants: per-architecture specs and fitted efficiencies.

Two data files next to this module:

- `arch_specs.yaml` (hand-written, sourced): FLOPs per cycle of each CPU
  microarchitecture and how much an in-order pipeline loses.
- `fitted_constants.yaml` (written by calibration/fit.py): the shared
  constants fitted to the published measurements (calibration/report.md
  says which rows identify each, and which could not be fitted):
  per CPU framework and pass the kernel efficiencies, launch cost and
  im2col traffic; the governor's sustained clock; the resident-memory and
  swap model; per GPU framework its kernel efficiencies, launch cost and
  host-device copies.

Device profiles name an `arch`, a `framework` and (for a GPU) a GPU
framework; everything device-specific (cores, clocks, caches, bandwidth)
stays in the profile.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml

from fedbench.devices.schema import Bound, Reader
from fedbench.errors import FedbenchError, choices

HERE = Path(__file__).resolve().parent
ARCH_FILE = HERE / "arch_specs.yaml"
FITTED_FILE = HERE / "fitted_constants.yaml"

Fraction = Annotated[float, Bound("fraction", 1e-5, 1.0)]
Efficiency = Annotated[float, Bound("fraction of peak (above 1: fast algorithms)", 1e-5, 8.0)]
Kcycles = Annotated[float, Bound("thousand cycles", 0.0, 1e5)]
Passes = Annotated[float, Bound("passes over the im2col matrix", 0.0, 100.0)]


@dataclass(frozen=True)
class ArchSpec:
    flops_per_cycle: Annotated[float, Bound("fp32 FLOPs per cycle per core", 1, 64)]
    pipeline: str
    source: str


@dataclass(frozen=True)
class ArchTable:
    arch: Mapping[str, ArchSpec]
    pipeline_efficiency: Mapping[str, float]
    pipeline_efficiency_source: str


@dataclass(frozen=True)
class PassConstants:
    """How a framework's kernels run one pass (forward, backward or the update)."""

    # Share of peak FLOP rate of GEMM-shaped calls (matmul, convolutions) at
    # full width; nominal FLOPs, so a fast algorithm can exceed 1.
    gemm_eff: Efficiency
    depthwise_eff: Efficiency
    # Serial work per call on the main thread (dispatch, shape checks,
    # allocation, kernel selection), in thousands of cycles of that core.
    dispatch_kcycles: Kcycles
    # Passes over a convolution's im2col matrix (write + read = 1 pass):
    # 0 where the framework uses Winograd/direct kernels.
    unfold_conv: Passes = 0.0
    unfold_depthwise: Passes = 0.0
    # Passes over the weights each GEMM-shaped call makes before computing
    # (packing into the kernel's layout, Winograd weight transforms):
    # paid per call whatever the batch - weights are read once per step,
    # activations once per sample.
    repack_weights: Passes = 0.0


@dataclass(frozen=True)
class CpuFramework:
    """What a CPU software stack adds on top of the hardware's roofline."""

    forward: PassConstants
    backward: PassConstants
    optimizer: PassConstants
    # Forward k x k stride-1 convolutions run this much faster than their
    # nominal FLOPs (Winograd: MNN's ConvolutionWinograd, NNPACK). MNN runs
    # them so in inference only: its training graph's convolutions take their
    # weights as graph inputs and run as im2col + MatMul
    # (fedbench/devices/lowering.py re-kinds them).
    winograd_speedup: Annotated[float, Bound("x", 1.0, 10.0)]
    # Plain GEMMs (linear layers, batched attention matmuls: the `matmul`
    # kind) run this much faster than the convolutions' GEMM efficiency.
    # PyTorch's CPU convolution (slow_conv2d) lowers each image of the
    # batch to its own im2col GEMM of N = that image's output pixels, and
    # re-packs both panels per image, while a linear layer or bmm is one
    # BLAS call over batch x tokens rows that reaches the BLAS kernel's
    # own rate. MNN runs its inner-product layers as 1x1 convolutions
    # through the same packed kernels, so its ratio is 1.
    matmul_speedup: Annotated[float, Bound("x", 0.25, 10.0)]
    # Cycles per element written, on top of the elementwise roofline, of
    # pools (max/average and their backward) and of normalisations
    # (batch/layer/group norm and their backward).
    pool_cycles_per_output: Annotated[float, Bound("cycles per element written", 0.0, 1e4)]
    norm_cycles_per_output: Annotated[float, Bound("cycles per element written", 0.0, 1e4)]
    # GEMM width at which register tiles are half used: a call whose
    # narrowest dimension is n runs at n / (n + narrow_half) of gemm_eff.
    narrow_half: Annotated[float, Bound("elements", 0.0, 1e4)]
    # Bytes per cycle per core the kernels stream from cache (elementwise
    # work, packing), and the share of DRAM bandwidth they reach.
    cache_bytes_per_cycle: Annotated[float, Bound("bytes per cycle", 0.1, 256.0)]
    dram_eff: Fraction
    # Per optimizer step, serial (graph setup, bookkeeping).
    step_overhead_mcycles: Annotated[float, Bound("Mcycles per step", 0.0, 1e5)]
    # Loading/decoding one input byte, serial (0 where the timed step
    # excludes data loading, as MNN's benchmark does).
    input_cycles_per_byte: Annotated[float, Bound("cycles per input byte", 0.0, 1e4)]
    # Resident set beyond the training tensors: the runtime itself, how
    # much its allocator and kernels hold per tensor byte, and what a graph
    # executor such as MNN's keeps beyond what autograd would save: per
    # byte of the k x k convolutions' im2col (MNN's geometry pass turns each
    # weight gradient into a full im2col of the input plus a matmul, its
    # source/geometry/GeometryConv2DBackPropFilter.cpp, and the buffers stay
    # allocated with the graph) and per byte of every forward call's output
    # (PyTorch frees both).
    runtime_mb: Annotated[float, Bound("MB", 0.0, 1e4)]
    rss_per_tensor_byte: Annotated[float, Bound("x", 1.0, 20.0)]
    rss_per_unfold_byte: Annotated[float, Bound("x", 0.0, 20.0)]
    rss_per_output_byte: Annotated[float, Bound("x", 0.0, 20.0)]
    # Cycles of the main core per KB of memory a step allocates afresh (the
    # resident set beyond the runtime): a graph executor that builds a new
    # graph every step, as MNN's does, faults in and zeroes those pages
    # every step, so its time per sample grows with the batch.
    fault_cycles_per_kb: Annotated[float, Bound("cycles per KB", 0.0, 1e5)]
    # Passes a normalisation makes over the bytes it touches, as a multiple of
    # reading its operands and writing its result once: a training batch
    # norm reads its input twice (statistics, then normalise) and its
    # backward reads input and gradient twice (reduction, then elementwise),
    # so 1.5-1.7x; an elementwise op that streams once is 1.
    norm_passes: Annotated[float, Bound("x the call's bytes", 1.0, 8.0)] = 1.0


@dataclass(frozen=True)
class GpuFramework:
    """A GPU software stack (CUDA through TensorFlow, OpenCL through MNN)."""

    gemm_eff: Efficiency
    depthwise_eff: Efficiency
    elementwise_eff: Fraction  # of the shared DRAM bandwidth
    narrow_half: Annotated[float, Bound("elements", 0.0, 1e4)]
    # Output elements per lane at which a kernel keeps half the GPU busy.
    occupancy_half_per_lane: Annotated[float, Bound("elements per lane", 0.01, 1e5)]
    launch_us: Annotated[float, Bound("us per kernel", 0.0, 1e5)]
    # Host-side work per call on the CPU's main core (graph executor,
    # argument setup).
    dispatch_kcycles: Kcycles
    # Share of each call's operand bytes copied between host and device
    # memory (OpenCL buffers/images mapped per op), at the profile's copy
    # bandwidth; 0 for unified CUDA memory kept on the device.
    transfer_fraction: Annotated[float, Bound("fraction", 0.0, 10.0)]
    runtime_mb: Annotated[float, Bound("MB", 0.0, 1e4)]
    rss_per_tensor_byte: Annotated[float, Bound("x", 1.0, 20.0)]
    # Share of the profile's copy bandwidth those copies reach (OpenCL
    # map/unmap with a layout conversion on the CPU runs far below DRAM
    # speed).
    copy_eff: Annotated[float, Bound("fraction of copy bandwidth", 1e-5, 1.0)] = 1.0
    # GPU convolutions (cuDNN's implicit GEMM, OpenCL image kernels) keep
    # no im2col buffers between the passes; the GPU stacks' resident set
    # is not measured per output (no published RSS).
    rss_per_unfold_byte: Annotated[float, Bound("x", 0.0, 20.0)] = 0.0
    rss_per_output_byte: Annotated[float, Bound("x", 0.0, 20.0)] = 0.0
    # Share of the host's dispatch hidden behind the GPU's work: 1 for an
    # asynchronous queue (CUDA streams: the host issues call i+1 while the
    # GPU runs call i, so a call costs the slower of the two), 0 for an
    # executor that waits on every call (the two add up).
    overlap: Annotated[float, Bound("fraction", 0.0, 1.0)] = 1.0
    # Host-device synchronisation per call on top of both (an executor that
    # maps each result back, or finishes the queue, before the next call).
    sync_us: Annotated[float, Bound("us per call", 0.0, 1e5)] = 0.0
    # Passes over a convolution's filter bytes that re-lay it out on every
    # call (TensorFlow keeps filters HWIO and cuDNN takes OIHW: conv_ops.cc
    # runs TransformFilter before each forward and input-gradient call and
    # transforms the filter gradient back after each filter-gradient call; a
    # pass reads and writes the filter, so 2), and the share of the DRAM
    # bandwidth those transpose kernels reach. 0 for a stack that lays its
    # filters out once.
    filter_transform_passes: Annotated[float, Bound("x the filter bytes", 0.0, 20.0)] = 0.0
    transform_eff: Annotated[float, Bound("fraction of DRAM bandwidth", 1e-4, 1.0)] = 1.0


@dataclass(frozen=True)
class Shared:
    # Output elements of a call at which the threads beyond the first are
    # half used: a small call (or a weight gradient with a small output)
    # does not split well across cores.
    parallel_half_outputs: Annotated[float, Bound("elements", 1.0, 1e9)]
    # Share of the last-level cache a call's operands can occupy.
    cache_share: Annotated[float, Bound("fraction of the LLC", 0.01, 10.0)]
    # Elementwise/movement calls: share of peak FLOP rate (they are nearly
    # always bandwidth-bound, so this rarely binds).
    elementwise_eff: Fraction
    # Clock a phone's default governor holds on a busy cluster, as a share
    # of the top DVFS step (schedutil headroom, power limits).
    phone_sustained_clock: Fraction
    # Swapping's throughput as a share of the profile's swap device
    # throughput (page-reclaim thrashing: every step pages its excess out
    # and back in).
    swap_efficiency: Annotated[float, Bound("fraction", 1e-4, 1.0)]
    # The power model's activity factors, fitted to whole-device power
    # measured during training (calibration/report.md, energy): a training
    # step's CPU power as a multiple of the profile's rated busy-core power,
    # and the SoC's energy per DRAM byte (controller, interconnect, system
    # cache and PHY on top of the DRAM itself) as a multiple of the profile's
    # `mem_w_per_gbs`.
    core_power_scale: Annotated[float, Bound("x the profile's core power", 0.1, 10.0)] = 1.0
    dram_energy_scale: Annotated[float, Bound("x the profile's mem_w_per_gbs", 0.1, 100.0)] = 1.0


@dataclass(frozen=True)
class Fitted:
    cpu: Mapping[str, CpuFramework]
    gpu: Mapping[str, GpuFramework]
    shared: Shared
    fit: Mapping[str, str]  # how and when the numbers were fitted, and to what


@dataclass(frozen=True)
class Constants:
    archs: ArchTable
    fitted: Fitted

    def arch(self, name: str) -> ArchSpec:
        return self.archs.arch[name]

    def core_peak_gflops(self, arch: str, freq_ghz: float) -> float:
        """Sustainable peak of one core: FLOPs/cycle x clock x pipeline efficiency."""
        spec = self.archs.arch[arch]
        return spec.flops_per_cycle * freq_ghz * self.archs.pipeline_efficiency[spec.pipeline]

    def core_ipc_scale(self, arch: str) -> float:
        """Relative speed of serial (scalar) work per cycle on this core."""
        return self.archs.pipeline_efficiency[self.archs.arch[arch].pipeline]

    def framework(self, name: str) -> CpuFramework:
        try:
            return self.fitted.cpu[name]
        except KeyError:
            raise FedbenchError(
                f"framework '{name}' has no fitted CPU constants in {FITTED_FILE.name}; "
                f"valid: {choices(self.fitted.cpu)}"
            ) from None

    def gpu_framework(self, name: str) -> GpuFramework:
        try:
            return self.fitted.gpu[name]
        except KeyError:
            raise FedbenchError(
                f"GPU framework '{name}' has no constants in {FITTED_FILE.name}; "
                f"valid: {choices(self.fitted.gpu)}"
            ) from None


def _read(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise FedbenchError(f"{path}: missing (run calibration/fit.py to write it)") from None
    except yaml.YAMLError as exc:
        raise FedbenchError(f"{path}: not valid YAML: {exc}") from None


def load_arch_table(path: Path = ARCH_FILE) -> ArchTable:
    reader = Reader(str(path))
    table = reader.build(ArchTable, _read(path))
    for name, spec in table.arch.items():
        if spec.pipeline not in table.pipeline_efficiency:
            raise reader.fail(
                f"arch.{name}.pipeline",
                f"expected one of {choices(table.pipeline_efficiency)}, got {spec.pipeline!r}",
            )
    return table


def parse_fitted(data: object, file: str) -> Fitted:
    reader = Reader(file)
    fitted = reader.build(Fitted, data)
    if not fitted.cpu:
        raise reader.fail("cpu", "expected at least one CPU framework")
    return fitted


@functools.lru_cache(maxsize=1)
def load_constants() -> Constants:
    """The shipped constants (cached: they are read-only data)."""
    return Constants(load_arch_table(), parse_fitted(_read(FITTED_FILE), str(FITTED_FILE)))
