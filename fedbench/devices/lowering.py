"""How a framework's own graph runs a call: one measured aten call, several kernels.

A workload's calls are PyTorch's (fedbench.measure): one aten call per
operator. A framework that builds its training graph out of smaller ops of
its own runs some of those calls as several kernels, each a pass over its
operands with its own dispatch. `lower` rewrites such calls (the call
table's `op` column names them, fedbench.measure.opclasses.NAMED_OPS) into
the kernels that framework runs, so the per-call model
(fedbench/devices/kernels.py) times what really runs.

MNN's training graph (tools/train, Express) is the same for every backend,
so its CPU and OpenCL stacks would lower alike; the CPU's does (LOWERINGS
says why the OpenCL one does not yet). The decompositions are those of
the MNN tree the calibration rows ran (UbiquitousLearning/
Benchmark-On-Device-Training, which builds MNN from its own copy; paths
below are in that tree):

- ReLU's gradient, tools/train/source/grad/ReluGrad.cpp (ReluGrad::onGrad):
  `mask = (_Sign(x) + 1) * 0.5; dx = mask * dy`, four elementwise kernels
  (Sign, add, multiply by a scalar, multiply by dy) where PyTorch runs one
  threshold_backward.
- ReLU6's gradient, the same file (Relu6Grad::onGrad):
  `mask0 = _Sign(x) + 1; mask1 = _Sign(6 - x) + 1;
  dx = mask0 * mask1 * dy * 0.25`, eight elementwise kernels where
  PyTorch runs one hardtanh_backward.

- Training-mode batch norm, express/module/NN.cpp (BatchNormModule::onForward,
  training branch): `_Convert` to NCHW, `_ReduceMean`, `x - mean`, `_Square`,
  `_ReduceMean`, `xSub * rStd`, `* scale`, `+ bias`, `_Convert` back to
  NC4HW4: nine passes over the activation, plus per-channel ops (`var + eps`,
  `_Sqrt`, `_Reciprocal`, the running mean and variance: three each) where
  PyTorch runs one native_batch_norm.
- Its gradient is what Express's autodiff makes of those ops
  (tools/train/source/grad/: TensorConvertGrad.cpp, BinaryGrad.cpp,
  ReduceGrad.cpp, OpGrad.cpp): the converts back, `+ bias` (a `_ReduceSum`
  for the bias), `* scale` (`g * scale`, and `g * norm` with its `_ReduceSum`
  for the scale), `* rStd` (`g * rStd`), `x - mean` (`_Negative` and a
  `_ReduceSum` for the mean, whose `_ReduceMean` gradient is a `ZerosLike`
  plus a broadcast `_Add`) and `_Add` accumulating the two gradients of x.
  UnaryGrad.cpp has no case for `_Reciprocal`, so nothing flows back through
  the variance: the `xSub * rStd` gradient for rStd and everything behind it
  are never evaluated (Express evaluates lazily).
- A depthwise convolution's filter gradient,
  source/geometry/GeometryConv2DBackPropFilter.cpp (computeForDepthWise):
  the input and the output gradient converted to NCHW, then per kernel tap
  a Raster that samples the shifted input, `_Multiply` with the output
  gradient, a `_ReduceSum` over the pixels and one over the batch; where
  PyTorch runs one depthwise weight-gradient kernel. (The input's convert
  is counted at the output gradient's size: the same for a stride-1 conv.)
  A geometry decomposition runs inside the one op (the backend executes its
  commands), so the framework dispatches it once: its later kernels carry
  no dispatch of their own (CallTable.follows).
- A dense convolution's forward, express/module/NN.cpp (ConvModule::onForward,
  training branch): `_Conv(weight, bias, x)` with the weight a graph input,
  which source/geometry/GeometryConv2D.cpp (computeIm2Col_GEMM) runs as an
  im2col Raster of the input and a MatMul - for a 1x1 convolution too - and
  never as MNN's Winograd or tiled convolutions: those take constant weights,
  which only the eval branch builds (it copies each weight into the op).
  The call keeps its FLOPs and becomes a GEMM over an im2col (the
  `conv_strided` kind: no Winograd speed-up), and a 1x1 convolution's im2col
  is a copy of its input.

PyTorch runs each measured call as one kernel, but which kernel a convolution
gets depends on the build. Its ARM boards' calibration rows ran the 1.13.1
aarch64 wheel, which has no oneDNN (pytorch/pytorch#97226: 1.13.0's wheel
had it, 1.13.1's does not), so aten/src/ATen/native/Convolution.cpp's
_select_conv_backend reaches ConvParams::use_nnpack: a non-dilated
convolution over at least 16 images runs NNPACK, forward only (its backward
is slow_conv_dilated2d_backward, an im2col like Slow2d's), in training too -
use_nnpack does not ask whether a gradient is needed. NNPACK's
nnp_convolution_output (src/convolution-output.c) picks its algorithm
itself: Winograd F(6x6, 3x3) on 8x8 tiles for a 3x3 kernel (the fitted
`winograd_speedup`), an 8x8 FFT (16x16 past 8x8 kernels) for every other
stride-1 kernel - a 1x1 convolution included, whose pointwise complex
products then cost twice its direct FLOPs - and no im2col: its transforms
write the input and output tiles into buffers. A strided convolution runs
nnp_convolution_inference image by image (aten/src/ATen/native/NNPACK.cpp),
as the measured GEMM. Below 16 images, Slow2d: an im2col + GEMM, so no
Winograd. A build with oneDNN (x86 wheels) convolves through it at every
batch (its use_mkldnn comes first): a profile says which library its build
links (`framework.conv_backend`), and a host's fitted kernel ratios
(profile.KernelScale) carry the rest of the difference.

Each kernel reads its tensor operands (a scalar or per-channel operand is
free) and writes a tensor of the call's size (the gradient, the activation,
or the depthwise conv's output); a reduction writes a per-channel one but
splits its input across threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from fedbench.core.workload import Workload
from fedbench.devices.kernels import BACKWARD, FORWARD, KIND, CallTable
from fedbench.measure.opclasses import NAMED_OPS

ELEMENT_BYTES = 4.0  # MNN trains in float32


@dataclass(frozen=True)
class Kernel:
    """One of the framework's kernels, its operands in units of the lowered call's size."""

    kind: str  # "elementwise" or "movement" (opclasses.KINDS)
    reads: float  # tensors of the call's size read (a scalar or per-channel operand: 0)
    writes: float  # tensors of the call's size written


def _ew(reads: float, writes: float = 1.0) -> Kernel:
    return Kernel("elementwise", reads, writes)


def _move(reads: float = 1.0, writes: float = 1.0) -> Kernel:
    return Kernel("movement", reads, writes)


_REDUCE = Kernel("elementwise", 1.0, 0.0)  # a full tensor in, a per-channel one out
_TINY = Kernel("elementwise", 0.0, 0.0)  # per-channel: its dispatch is its cost


def _depthwise_filter_grad(taps: int) -> tuple[Kernel, ...]:
    # convert input, convert output gradient; per tap: Raster, multiply, two reductions;
    # the per-tap results rastered into the filter gradient.
    per_tap = (_move(), _ew(2), _REDUCE, _TINY)
    return (_move(), _move()) + per_tap * taps + (_move(0.0, 0.0),)


# Per lowered op: the kernels it becomes.
_MNN_FIXED: Mapping[str, tuple[Kernel, ...]] = {
    # Sign(x), + 1, * 0.5, * dy
    "threshold_backward": (_ew(1), _ew(1), _ew(1), _ew(2)),
    # Sign(x), + 1, 6 - x, Sign, + 1, mask0 * mask1, * dy, * 0.25
    "hardtanh_backward": (_ew(1), _ew(1), _ew(1), _ew(1), _ew(1), _ew(2), _ew(2), _ew(1)),
    # convert, mean, x - mean, square, mean, * rStd, * scale, + bias, convert;
    # var + eps, sqrt, reciprocal, running mean and variance (3 each)
    "native_batch_norm": (
        _move(),
        _REDUCE,
        _ew(1),
        _ew(1),
        _REDUCE,
        _ew(1),
        _ew(1),
        _ew(1),
        _move(),
    )
    + (_TINY,) * 9,
    # convert; bias: sum; scale: g * scale, g * norm, sum; g * rStd; mean: negative,
    # sum, ZerosLike, broadcast add; x: add the two gradients; convert
    "native_batch_norm_backward": (
        _move(),
        _REDUCE,
        _ew(1),
        _ew(2),
        _REDUCE,
        _ew(1),
        _ew(1),
        _REDUCE,
        _TINY,
        _move(0.0, 1.0),
        _ew(1),
        _ew(2),
        _move(),
    ),
}
_DEPTHWISE = "convolution_backward.depthwise_weight"
# Ops MNN decomposes inside the op's own execution (source/geometry: the
# backend runs the decomposition's commands as one op), not as Express ops of
# the graph: the op is dispatched once, its kernels after the first follow it.
_WITHIN_ONE_OP = frozenset({_DEPTHWISE})


def _mnn(name: str, taps: int) -> tuple[Kernel, ...]:
    if name == _DEPTHWISE:
        return _depthwise_filter_grad(taps)
    return _MNN_FIXED[name]


def _mnn_convolutions(table: CallTable, batch: int, backend: str) -> CallTable:
    """Forward dense convolutions as GeometryConv2D's im2col + MatMul (module docstring)."""
    if not (table.phase == BACKWARD).any():
        return table  # the eval branch: constant-weight Winograd and tiled convolutions
    forward = table.phase == FORWARD
    kxk = forward & (table.kind == KIND["conv_kxk"])
    one = forward & (table.kind == KIND["conv1x1"])
    kind = np.where(kxk, KIND["conv_strided"], table.kind)
    # A 1x1 convolution's call reads its input, its weights and writes its output.
    unfold = np.where(one, _inputs(table), table.unfold)
    return replace(table, kind=kind, unfold=unfold)


# PyTorch's ConvParams::use_nnpack: NNPACK convolves a batch of at least 16.
_NNPACK_MIN_BATCH = 16
# NNPACK's fast convolutions (src/convolution-output.c): 8x8 input tiles (16x16
# for kernels over 8); a 3x3 kernel's Winograd F(6x6, 3x3) leaves 6x6 outputs.
_TILE, _WIDE_TILE = 8.0, 16.0
_WINOGRAD_OUT = 6.0


def _pytorch_convolutions(table: CallTable, batch: int, backend: str) -> CallTable:
    """Forward dense convolutions as PyTorch's CPU build runs them (module docstring)."""
    if backend == "onednn":
        return table  # oneDNN's kernels at every batch: the measured kinds
    forward = table.phase == FORWARD
    if batch < _NNPACK_MIN_BATCH:
        # Slow2d: an im2col + GEMM, so no Winograd for a k x k convolution.
        kxk = forward & (table.kind == KIND["conv_kxk"])
        return replace(table, kind=np.where(kxk, KIND["conv_strided"], table.kind))
    nnpack = forward & np.isin(table.kind, [KIND["conv1x1"], KIND["conv_kxk"]])
    winograd = nnpack & (table.kind == KIND["conv_kxk"]) & (table.taps == 9)
    fft = nnpack & ~winograd
    # Pointwise complex products over the FFT tile's T^2 / 2 complex elements:
    # 4 T^2 FLOPs per tile and channel pair, for (T + 1 - k)^2 outputs that a
    # direct convolution computes in 2 k^2 FLOPs each (a 1x1 kernel: twice).
    k = np.sqrt(np.maximum(table.taps, 1.0))
    tile = np.where(k > _TILE, _WIDE_TILE, _TILE)
    out_tile = np.where(winograd, _WINOGRAD_OUT, tile + 1.0 - k)
    flops = np.where(fft, table.flops * 2.0 * tile**2 / (out_tile**2 * k**2), table.flops)
    # No im2col: the transforms write each input and output tile (T / output tile)^2
    # of its tensor into buffers the products then read.
    cover = (tile / out_tile) ** 2
    tiles = cover * (_inputs(table) + ELEMENT_BYTES * table.outputs)
    unfold = np.where(nnpack, tiles, table.unfold)
    # The FFT's products are a GEMM over channels (conv1x1: no Winograd speed-up).
    kind = np.where(fft, KIND["conv1x1"], table.kind)
    return replace(table, kind=kind, flops=flops, unfold=unfold)


def _inputs(table: CallTable) -> np.ndarray:
    """A forward convolution's input bytes: its call reads them and its weights."""
    return np.maximum(0.0, table.bytes - table.weights - ELEMENT_BYTES * table.outputs)


def _no_rule(name: str, taps: int) -> tuple[Kernel, ...]:
    raise KeyError(f"PyTorch runs {name} as one kernel: nothing to lower")


Rule = Callable[[str, int], tuple[Kernel, ...]]
# How a framework's training graph runs calls it does not rename: every call
# of the table in, the same calls out (re-kinded, their traffic changed).
# (calls, images per convolution, the build's convolution library:
# profile.CONV_BACKENDS)
Convolutions = Callable[[CallTable, int, str], CallTable]


@dataclass(frozen=True)
class Lowering:
    names: frozenset[str]  # the named ops (NAMED_OPS) it decomposes
    rule: Rule  # op name, kernel taps -> kernels
    convolutions: Convolutions


# Per framework: the ops it lowers, and how.
LOWERINGS: Mapping[str, Lowering] = {
    "mnn": Lowering(frozenset(_MNN_FIXED) | {_DEPTHWISE}, _mnn, _mnn_convolutions),
    "pytorch": Lowering(frozenset(), _no_rule, _pytorch_convolutions),
    # Not yet "mnn_opencl", though MNN builds the same graph for it: the phone-GPU
    # stack's copies are solved from paper 003's 91% data-movement share over the
    # measured calls. Lowered - with per-op maps, or with the copies MNN's source
    # makes (its CPU backup's ops, SGD's parameter round trips) - the emulated GPU
    # kernels alone took 1.0-1.8x the CPU's step (before narrow_half 0) and the
    # Mi 9's GPU/CPU ratios left paper 001's 1.8x-12x band: calibration/report.md,
    # known gaps.
}


def lower_workload(workload: Workload, framework: str, backend: str = "nnpack") -> CallTable:
    """`workload`'s calls as `framework` runs them (`lower`), at its micro-batch."""
    return lower(CallTable.of(workload), framework, workload.micro_batch, backend)


def lower(table: CallTable, framework: str, batch: int, backend: str = "nnpack") -> CallTable:
    """`table` (calls on `batch` images at a time) as `framework`'s graph runs it: its
    convolutions as that framework's build (`backend`, profile.CONV_BACKENDS) runs them
    (Lowering.convolutions), each call its training graph runs as several kernels
    replaced by those kernels."""
    if framework not in LOWERINGS:
        return table
    lowering = LOWERINGS[framework]
    table = lowering.convolutions(table, batch, backend)
    if not (table.phase == BACKWARD).any():
        # Inference runs the framework's eval-mode graph (e.g. MNN's BatchNormModule
        # folds into one Scale op outside training): no training op to lower.
        return table
    names, rule = lowering.names, lowering.rule
    ruled = np.array([n in names for n in NAMED_OPS])[table.op]
    calls = np.flatnonzero(ruled)
    if not len(calls):
        return table
    count = np.ones(len(table), np.int64)
    kinds: list[int] = []
    moved: list[float] = []  # tensors of the call's size read + written
    written: list[float] = []
    elementwise: list[bool] = []
    sizes: list[float] = []
    follows: list[float] = []  # 1: dispatched with the kernel before it, as one op
    for i in calls:
        name, taps = NAMED_OPS[table.op[i]], int(table.taps[i])
        kernels = rule(name, taps)
        count[i] = len(kernels)
        # Elements of the gradient (or output) the op computes; for a depthwise
        # filter gradient, the conv's output (its FLOPs are 2 x taps per output).
        size = table.flops[i] / (2.0 * taps) if name == _DEPTHWISE else table.outputs[i]
        within = name in _WITHIN_ONE_OP
        for j, k in enumerate(kernels):
            follows.append(1.0 if within and j > 0 else 0.0)
            kinds.append(KIND[k.kind])
            moved.append(k.reads + k.writes)
            written.append(k.writes if k.writes or not k.reads else k.reads)
            elementwise.append(k.kind == "elementwise" and (k.reads + k.writes) > 0)
            sizes.append(size)
    source = np.repeat(np.arange(len(table)), count)
    out = {f: getattr(table, f)[source].copy() for f in CallTable.__dataclass_fields__}
    at = np.flatnonzero(ruled[source])  # the kernels, in the order built above
    size_k = np.array(sizes)
    out["kind"][at] = kinds
    out["bytes"][at] = np.array(moved) * size_k * ELEMENT_BYTES
    out["follows"][at] = follows
    out["flops"][at] = np.where(elementwise, size_k, 0.0)
    # A per-channel kernel writes a handful of elements (never none: a GPU's occupancy).
    out["outputs"][at] = np.maximum(np.array(written) * size_k, 1.0)
    out["narrow"][at] = 0.0
    out["unfold"][at] = 0.0
    out["weights"][at] = 0.0
    out["op"][at] = 0
    out["taps"][at] = 0.0
    return CallTable(**out)
