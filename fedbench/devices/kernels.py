"""The time of each operator call of a training step: a per-call roofline.

Every charged aten call of the measured step (`Workload.calls`) is timed
on its own, because what limits a call depends on the call, not on its
class's total: a batch-1 linear layer is a matrix-vector product bound by
streaming its weights, a weight gradient with a small output does not
split across cores, an activation that outgrows the cache streams from
DRAM. For call i on a CPU:

    compute_i = (flops_i / (core_peak x eff_i) + outputs_i x cycles_i / clock) / n_eff_i
    cache_i   = passes_i x bytes_i / (n_eff_i x clock x cache_bytes_per_cycle)
    dram_i    = passes_i x max(0, bytes_i - cache_share x LLC) / (dram_gbs x dram_eff)
    unfold_i  = passes x im2col_bytes_i, at the cache or DRAM speed above
    repack_i  = passes x weight_bytes_i, likewise (weights packed/transformed per call)
    t_i       = max(compute_i, cache_i, dram_i) + unfold_i + repack_i + dispatch_i

with n_eff_i = 1 + (n - 1) o_i / (o_i + o_half) the threads a call with o_i
output elements keeps busy (optimizer calls run on the main thread:
n = 1), eff_i the framework's efficiency for the call's kind and pass
(GEMM-shaped, depthwise, elementwise), scaled by the Winograd speed-up for
forward k x k stride-1 convolutions (the `conv_kxk` kind; a framework whose
training graph runs them otherwise re-kinds them: fedbench/devices/lowering.py),
by the framework's `matmul_speedup` for plain GEMMs (linear layers,
attention's batched matmuls: one BLAS call over batch x tokens rows where a
convolution is lowered image by image), and by n / (n + narrow_half) for a
GEMM whose narrowest dimension is n, cycles_i the framework's cycles per
element written by a pool or a normalisation (0 for other calls), and
dispatch_i the framework's serial per-call cost in cycles of the main core,
and passes_i the framework's `norm_passes` for a normalisation (a training
batch norm reads its operands twice) and 1 for every other call.
A device profile's `framework.kernel_scale` multiplies the efficiencies,
the cache bytes per cycle, those cycles and the im2col passes: its own
build of the framework relative to the fitted one (profile_device fits it).

On a GPU (`gpu_call_seconds`) the same call runs at the GPU's peak and the
shared DRAM bandwidth, at the occupancy its output elements give a GPU of
that many lanes (o / (o + lanes x occupancy_half_per_lane): a kernel
writing a few thousand elements leaves most lanes idle), plus a kernel
launch, while the host dispatches it. How much of the host's dispatch the
GPU's work hides is the framework's `overlap` (1: an asynchronous queue,
the slower of the two sets the pace; 0: the host waits for every call, the
two add up), and an executor that synchronises with the GPU after every
call pays `sync_us` on top:

    t_i = device_i + host_i - overlap x min(device_i, host_i) + sync + transfer_i

A stack that keeps convolution filters in another layout than its kernels
take re-lays them out around every convolution call: TensorFlow stores
HWIO and cuDNN reads OIHW, so device_i of a convolution carries
`filter_transform_passes` x its filter bytes at `transform_eff` of the DRAM
bandwidth, and one more launch. That cost follows the parameters, not the
batch: paper 000's TX2 throughputs put ResNet50's (25M parameters) fixed
time per step at ~4x DenseNet40's (1M), with a similar number of calls.

Frameworks that map buffers per op (OpenCL) copy a share of the operands
between host and device memory at the profile's copy bandwidth
(`transfer_i`); CUDA on a Jetson keeps tensors in the unified DRAM the GPU
shares with the CPU, so nothing is copied but the input batch.

The functions work on columns (numpy arrays), so the calibration fit times
all its rows in one call of the same code the emulator runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fedbench.core.workload import OP_CLASSES, Workload
from fedbench.devices.constants import CpuFramework, GpuFramework, PassConstants, Shared
from fedbench.measure.opclasses import KINDS

GB = 1e9
PHASE_NAMES: tuple[str, ...] = ("forward", "backward", "optimizer")
FORWARD, BACKWARD, OPTIMIZER = range(3)
KIND = {k: i for i, k in enumerate(KINDS)}
GEMM_KINDS = np.array([KIND[k] for k in ("matmul", "conv1x1", "conv_kxk", "conv_strided")])
CONV_KINDS = np.array([KIND[k] for k in ("conv1x1", "conv_kxk", "conv_strided")])
# The op class each kind belongs to (for the per-class breakdown); the rest are dense.
_CLASS_OF_KIND = {
    "depthwise": "depthwise",
    "elementwise": "elementwise",
    "pool": "elementwise",
    "norm": "elementwise",
    "movement": "movement",
}
KIND_CLASS = np.array([OP_CLASSES.index(_CLASS_OF_KIND.get(k, "dense")) for k in KINDS])
# Class totals stand in for calls in hand-built workloads (no call table):
# one GEMM-shaped call per class, fully parallel, never narrow.
_FALLBACK_KIND = {
    "dense": "conv_strided",
    "depthwise": "depthwise",
    "elementwise": "elementwise",
    "movement": "movement",
}


@dataclass(frozen=True)
class CallTable:
    """The calls of one step (or of many concatenated steps), as numpy columns."""

    phase: np.ndarray
    kind: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    narrow: np.ndarray
    outputs: np.ndarray
    unfold: np.ndarray
    weights: np.ndarray
    # Index into opclasses.NAMED_OPS (0: any other op) and kernel taps of a
    # convolution call (0 otherwise): what fedbench.devices.lowering needs.
    # Left out (a hand-built table), every call is 0.
    op: np.ndarray = None  # type: ignore[assignment]
    taps: np.ndarray = None  # type: ignore[assignment]
    # 1 for a later kernel of one op's own decomposition: the framework
    # dispatches (and synchronises) the op once, not each of its kernels.
    follows: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name, dtype in (("op", np.int64), ("taps", float), ("follows", float)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(len(self.flops), dtype))

    @classmethod
    def of(cls, w: Workload) -> CallTable:
        c = w.calls
        if c is not None:
            n = len(c.flops)
            return cls(
                np.asarray(c.phase, dtype=np.int64),
                np.asarray(c.kind, dtype=np.int64),
                np.asarray(c.flops, dtype=float),
                np.asarray(c.bytes, dtype=float),
                np.asarray(c.narrow, dtype=float),
                np.asarray(c.outputs, dtype=float),
                np.asarray(c.unfold, dtype=float),
                np.asarray(c.weights, dtype=float),
                np.asarray(c.op, dtype=np.int64) if len(c.op) == n else np.zeros(n, np.int64),
                np.asarray(c.taps, dtype=float) if len(c.taps) == n else np.zeros(n),
            )
        rows = [
            (p, KIND[_FALLBACK_KIND[cls_]], cost.flops, cost.bytes)
            for p, costs in ((FORWARD, w.forward), (BACKWARD, w.backward))
            for cls_, cost in costs.items()
            if cost.flops > 0 or cost.bytes > 0
        ]
        if w.optimizer.flops > 0 or w.optimizer.bytes > 0:
            rows.append((OPTIMIZER, KIND["elementwise"], w.optimizer.flops, w.optimizer.bytes))
        n = len(rows)
        return cls(
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2] for r in rows], dtype=float),
            np.array([r[3] for r in rows], dtype=float),
            np.zeros(n),
            np.full(n, 1e12),  # as parallel as it gets
            np.zeros(n),
            np.zeros(n),
            np.zeros(n, np.int64),
            np.zeros(n),
        )

    def __len__(self) -> int:
        return len(self.flops)

    def select(self, mask: np.ndarray) -> CallTable:
        return CallTable(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))

    @staticmethod
    def concat(tables: list[CallTable]) -> CallTable:
        return CallTable(
            *(
                np.concatenate([getattr(t, f) for t in tables])
                for f in CallTable.__dataclass_fields__
            )
        )


@dataclass(frozen=True)
class CpuRig:
    """Where a step's calls run: broadcastable to the calls (scalars, or per-call arrays)."""

    threads: np.ndarray | float  # training threads
    core_gflops: np.ndarray | float  # peak of the slowest active core (threads split evenly)
    main_ghz: np.ndarray | float  # main (fastest active) core clock x its IPC scale
    dram_gbs: np.ndarray | float
    cache_bytes: np.ndarray | float  # last-level cache
    dispatch_scale: np.ndarray | float = 1.0  # the profile's framework.dispatch_scale
    # The profile's framework.kernel_scale: this device's kernels vs the fitted ones.
    gemm_scale: np.ndarray | float = 1.0
    depthwise_scale: np.ndarray | float = 1.0
    elementwise_scale: np.ndarray | float = 1.0
    pool_scale: np.ndarray | float = 1.0
    norm_scale: np.ndarray | float = 1.0
    cache_scale: np.ndarray | float = 1.0
    unfold_scale: np.ndarray | float = 1.0


@dataclass(frozen=True)
class CallSeconds:
    """Per call: the roofline part, the re-layout traffic and the serial dispatch."""

    roofline: np.ndarray
    unfold: np.ndarray  # im2col/col2im of activations
    repack: np.ndarray  # packing/transforming weights
    dispatch: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.roofline + self.unfold + self.repack + self.dispatch


def _by_pass(table: CallTable, fw: CpuFramework, field: str) -> np.ndarray:
    passes: tuple[PassConstants, ...] = (fw.forward, fw.backward, fw.optimizer)
    return np.array([getattr(p, field) for p in passes])[table.phase]


def cpu_efficiency(table: CallTable, fw: CpuFramework, shared: Shared, rig: CpuRig) -> np.ndarray:
    """eff_i: the share of the core's peak FLOP rate call i reaches on `rig`'s kernels."""
    gemm = np.isin(table.kind, GEMM_KINDS)
    eff = np.where(
        gemm,
        _by_pass(table, fw, "gemm_eff") * rig.gemm_scale,
        np.where(
            table.kind == KIND["depthwise"],
            _by_pass(table, fw, "depthwise_eff") * rig.depthwise_scale,
            shared.elementwise_eff * rig.elementwise_scale,
        ),
    )
    winograd = (table.kind == KIND["conv_kxk"]) & (table.phase == FORWARD)
    eff = np.where(winograd, eff * fw.winograd_speedup, eff)
    # One BLAS call over the whole batch, not a GEMM per image (CpuFramework.matmul_speedup).
    eff = np.where(table.kind == KIND["matmul"], eff * fw.matmul_speedup, eff)
    thin = gemm & (table.narrow > 0)
    width = table.narrow / (table.narrow + fw.narrow_half)
    return np.where(thin, eff * width, eff)


def cpu_call_seconds(
    table: CallTable, rig: CpuRig, fw: CpuFramework, shared: Shared
) -> CallSeconds:
    """Seconds of every call on the CPU (module docstring)."""
    threads = np.where(table.phase == OPTIMIZER, 1.0, rig.threads)
    o = table.outputs
    n_eff = 1.0 + (threads - 1.0) * o / (o + shared.parallel_half_outputs)
    eff = cpu_efficiency(table, fw, shared, rig)
    # Pools and normalisations stream like any elementwise op; each element
    # they write costs its own cycles on top (window bounds, argmax, divisors;
    # the passes that collect per-channel statistics).
    per_output = np.where(
        table.kind == KIND["pool"],
        fw.pool_cycles_per_output * rig.pool_scale,
        np.where(table.kind == KIND["norm"], fw.norm_cycles_per_output * rig.norm_scale, 0.0),
    )
    extra = table.outputs * per_output / GB / rig.main_ghz
    compute = (table.flops / GB / (rig.core_gflops * eff) + extra) / n_eff
    cache_rate = n_eff * rig.main_ghz * fw.cache_bytes_per_cycle * rig.cache_scale  # GB/s
    dram_rate = rig.dram_gbs * fw.dram_eff
    fits = shared.cache_share * rig.cache_bytes

    def traffic(nbytes: np.ndarray, passes: np.ndarray | float = 1.0) -> np.ndarray:
        dram = passes * np.maximum(0.0, nbytes - fits)
        return np.maximum(passes * nbytes / GB / cache_rate, dram / GB / dram_rate)

    # A training normalisation streams its operands more than once.
    norm_passes = np.where(table.kind == KIND["norm"], fw.norm_passes, 1.0)
    roofline = np.maximum(compute, traffic(table.bytes, norm_passes))
    passes = np.where(
        table.kind == KIND["depthwise"],
        _by_pass(table, fw, "unfold_depthwise"),
        np.where(np.isin(table.kind, GEMM_KINDS), _by_pass(table, fw, "unfold_conv"), 0.0),
    )
    unfold = traffic(passes * rig.unfold_scale * table.unfold)
    repack = traffic(_by_pass(table, fw, "repack_weights") * table.weights)
    kcycles = _by_pass(table, fw, "dispatch_kcycles") * rig.dispatch_scale
    dispatch = (1.0 - table.follows) * kcycles * 1e3 / (rig.main_ghz * GB)
    return CallSeconds(roofline, unfold, repack, dispatch)


@dataclass(frozen=True)
class GpuRig:
    lanes: np.ndarray | float
    peak_gflops: np.ndarray | float
    dram_gbs: np.ndarray | float
    copy_gbs: np.ndarray | float
    host_ghz: np.ndarray | float  # the host core that dispatches (clock x IPC scale)


@dataclass(frozen=True)
class GpuCallSeconds:
    device: np.ndarray  # the kernel on the GPU, launch included
    dispatch: np.ndarray  # the host's work to issue it
    transfer: np.ndarray  # host<->device copies of its operands
    sync: np.ndarray  # waiting for the GPU after the call
    overlap: float  # share of the shorter of device and dispatch hidden by the other

    @property
    def exposed_dispatch(self) -> np.ndarray:
        """Host dispatch the GPU's work does not hide."""
        return self.dispatch - self.overlap * np.minimum(self.device, self.dispatch)

    @property
    def total(self) -> np.ndarray:
        return self.device + self.exposed_dispatch + self.sync + self.transfer


def gpu_call_seconds(table: CallTable, rig: GpuRig, fw: GpuFramework) -> GpuCallSeconds:
    """Seconds of every call on the GPU (module docstring)."""
    gemm = np.isin(table.kind, GEMM_KINDS)
    eff = np.where(
        gemm,
        fw.gemm_eff,
        np.where(table.kind == KIND["depthwise"], fw.depthwise_eff, fw.elementwise_eff),
    )
    thin = gemm & (table.narrow > 0)
    # (a stack with narrow_half 0 loses nothing to thin GEMMs; the floor avoids 0 / 0)
    width = table.narrow / np.maximum(table.narrow + fw.narrow_half, 1e-30)
    eff = np.where(thin, eff * width, eff)
    o = table.outputs
    occupancy = o / (o + rig.lanes * fw.occupancy_half_per_lane)
    compute = table.flops / GB / (rig.peak_gflops * eff * occupancy)
    memory = table.bytes / GB / (rig.dram_gbs * fw.elementwise_eff * occupancy)
    device = np.maximum(compute, memory) + fw.launch_us * 1e-6
    # Filter re-layout kernels around each convolution (one more launch each).
    conv = np.isin(table.kind, CONV_KINDS) & (fw.filter_transform_passes > 0)
    relayout = fw.filter_transform_passes * table.weights / GB / (rig.dram_gbs * fw.transform_eff)
    device = device + np.where(conv, relayout + fw.launch_us * 1e-6, 0.0)
    once = 1.0 - table.follows  # an op's host work and wait, once per op
    dispatch = once * fw.dispatch_kcycles * 1e3 / (rig.host_ghz * GB)
    transfer = fw.transfer_fraction * table.bytes / GB / (rig.copy_gbs * fw.copy_eff)
    sync = once * fw.sync_us * 1e-6
    return GpuCallSeconds(device, dispatch, transfer, sync, fw.overlap)


def by_class(table: CallTable, seconds: np.ndarray) -> Mapping[str, float]:
    """Seconds per op class (dense, depthwise, elementwise, movement) of the non-optimizer calls."""
    mask = table.phase != OPTIMIZER
    sums = np.bincount(
        KIND_CLASS[table.kind[mask]], weights=seconds[mask], minlength=len(OP_CLASSES)
    )
    return {c: float(v) for c, v in zip(OP_CLASSES, sums, strict=True)}
