"""How MNN and PyTorch's ARM build run the measured calls (fedbench.devices.lowering).

Each figure below is counted by hand from the MNN, PyTorch and NNPACK sources
cited in fedbench/devices/lowering.py, so a change to a decomposition fails here.
"""

from __future__ import annotations

import numpy as np
import torch
from pytest import approx
from torch import nn

from fedbench.devices.constants import load_constants
from fedbench.devices.kernels import BACKWARD, FORWARD, KIND, CallTable, CpuRig, cpu_call_seconds
from fedbench.devices.lowering import lower
from fedbench.measure.opclasses import NAMED_OPS
from fedbench.measure.workload import measure_workload

CONSTS = load_constants()
RIG = CpuRig(threads=4.0, core_gflops=20.0, main_ghz=2.0, dram_gbs=10.0, cache_bytes=2**21)


def one_call(
    name: str, phase: int = BACKWARD, outputs: float = 1e5, taps: float = 0.0
) -> CallTable:
    """A table of a forward conv and one named call (lowering needs a backward phase)."""
    kind = "depthwise" if "depthwise" in name else "elementwise"
    flops = 2.0 * taps * outputs if taps else outputs
    return CallTable(
        np.array([FORWARD, phase]),
        np.array([KIND["conv1x1"], KIND[kind]]),
        np.array([1e9, flops]),
        np.array([1e6, 3 * 4 * outputs]),
        np.array([64.0, 0.0]),
        np.array([1e5, outputs]),
        np.zeros(2),
        np.zeros(2),
        np.array([0, NAMED_OPS.index(name)]),
        np.array([0.0, taps]),
    )


def test_relu_and_relu6_gradients_become_mnn_sign_arithmetic() -> None:
    """ReluGrad.cpp: ReLU's gradient is 4 kernels, ReLU6's 8; each streams its call's size."""
    for name, kernels in (("threshold_backward", 4), ("hardtanh_backward", 8)):
        low = lower(one_call(name), "mnn", 16)
        assert len(low) == 1 + kernels
        assert (low.kind[1:] == KIND["elementwise"]).all()
        assert (low.outputs[1:] == 1e5).all()
        assert low.follows.sum() == 0  # Express ops: each dispatched on its own


def test_training_batch_norm_becomes_nine_passes_and_nine_per_channel_ops() -> None:
    """NN.cpp's training BatchNormModule: 9 kernels over the activation, 9 per channel."""
    low = lower(one_call("native_batch_norm"), "mnn", 16)
    assert len(low) == 1 + 18
    passes = low.bytes[1:] > 0
    assert passes.sum() == 9
    # convert, mean, x - mean, square, mean, * rStd, * scale, + bias, convert:
    # 2 + 1 + 2 + 2 + 1 + 2 + 2 + 2 + 2 = 16 tensors of 4-byte elements moved
    assert low.bytes[1:].sum() == 16 * 4 * 1e5


def test_a_3x3_depthwise_filter_gradient_is_39_kernels_dispatched_once() -> None:
    """GeometryConv2DBackPropFilter.cpp: 2 converts, 4 kernels per tap, 1 raster out;
    one op, so one dispatch: on the CPU its cost is one call's dispatch."""
    name = "convolution_backward.depthwise_weight"
    low = lower(one_call(name, taps=9.0), "mnn", 16)
    assert len(low) == 1 + 2 + 4 * 9 + 1
    assert low.follows[1] == 0.0 and (low.follows[2:] == 1.0).all()
    fw = CONSTS.framework("mnn")
    dispatch = cpu_call_seconds(low, RIG, fw, CONSTS.fitted.shared).dispatch
    assert dispatch[1] > 0
    assert np.count_nonzero(dispatch[1:]) == 1


def test_inference_other_frameworks_and_other_ops_are_not_lowered() -> None:
    """Inference runs MNN's eval graph; PyTorch and the phone GPU stack run the calls as
    measured (lowering.LOWERINGS says why OpenCL is not lowered yet)."""
    fwd = one_call("native_batch_norm", phase=FORWARD)
    assert len(lower(fwd, "mnn", 16)) == 2
    for framework in ("pytorch", "mnn_opencl", "tensorflow"):
        assert len(lower(one_call("native_batch_norm"), framework, 16)) == 2
    other = one_call("threshold_backward")
    other.op[1] = 0
    assert len(lower(other, "mnn", 16)) == 2


def test_a_measured_mobilenet_block_is_lowered_call_by_call() -> None:
    """A real measured workload (conv-BN-ReLU6 then depthwise-BN-ReLU6): every named call
    it records is lowered and nothing else changes."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 1),
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8),
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.Flatten(),
        nn.Linear(8 * 8 * 8, 10),
    )
    w = measure_workload(net, (3, 8, 8), 4, model_name="block")
    table = CallTable.of(w)
    named = {NAMED_OPS[i]: int((table.op == i).sum()) for i in range(1, len(NAMED_OPS))}
    assert named == {
        "threshold_backward": 0,
        "hardtanh_backward": 2,
        "native_batch_norm": 2,
        "native_batch_norm_backward": 2,
        "convolution_backward.depthwise_weight": 1,
    }
    low = lower(table, "mnn", 16)
    # ReLU6 grads 8 kernels, BN 18, BN backward 13, the depthwise filter grad 39
    extra = 2 * (8 - 1) + 2 * (18 - 1) + 2 * (13 - 1) + (39 - 1)
    assert len(low) == len(table) + extra
    assert (low.op == 0).all()
    # The calls MNN runs as PyTorch does are untouched: same FLOPs and bytes per kind.
    for kind in ("conv1x1", "matmul"):
        k = KIND[kind]
        assert low.flops[low.kind == k].sum() == table.flops[table.kind == k].sum()
        assert low.bytes[low.kind == k].sum() == table.bytes[table.kind == k].sum()
    assert low.bytes.sum() > 3 * table.bytes.sum()


def test_mnn_trains_its_convolutions_as_im2col_and_matmul_never_winograd() -> None:
    """GeometryConv2D.cpp: a training conv (weight a graph input) is an im2col Raster and a
    MatMul - a 1x1 conv's im2col a copy of its input; Winograd is inference's (NN.cpp's
    eval branch builds constant-weight convs), so the eval forward keeps its speed-up."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 1), nn.Flatten(), nn.Linear(16 * 64, 10)
    )
    w = measure_workload(net, (3, 8, 8), 4, model_name="convs")
    table = CallTable.of(w)
    low = lower(table, "mnn", 16)
    forward = table.phase == FORWARD
    kxk = forward & (table.kind == KIND["conv_kxk"])
    one = forward & (table.kind == KIND["conv1x1"])
    assert kxk.sum() == 1 and one.sum() == 1
    assert len(low) == len(table)  # no named op here: the same calls, re-kinded
    assert low.kind[kxk] == KIND["conv_strided"]
    assert low.flops[kxk] == table.flops[kxk] and low.unfold[kxk] == table.unfold[kxk]
    # The 1x1 conv's input, 4 images x 8 channels x 8 x 8 float32 (and its 16 biases:
    # the call's bytes count them with its operands, its weight bytes do not).
    assert table.unfold[one] == 0 and low.unfold[one] == 4 * 8 * 8 * 8 * 4 + 16 * 4
    assert (low.kind[~forward] == table.kind[~forward]).all()
    assert (low.unfold[~forward] == table.unfold[~forward]).all()
    fw = CONSTS.framework("mnn")
    assert fw.winograd_speedup > 1
    shared = CONSTS.fitted.shared
    train = cpu_call_seconds(low, RIG, fw, shared).roofline[kxk]
    measured = cpu_call_seconds(table, RIG, fw, shared).roofline[kxk]
    assert train > measured  # the measured kind, as inference runs it, has Winograd's speed
    inference = table.select(forward)
    assert (lower(inference, "mnn", 16).kind == inference.kind).all()


def test_pytorch_convolves_a_batch_of_16_with_nnpack_and_a_smaller_one_with_im2col() -> None:
    """PyTorch 1.13's ARM wheel has no oneDNN, so ConvParams::use_nnpack decides: from 16
    images a stride-1 conv runs NNPACK's auto algorithm (convolution-output.c) - Winograd
    F(6x6, 3x3) for a 3x3 kernel, an 8x8 FFT (twice a 1x1 conv's FLOPs) otherwise - with
    transform buffers for tiles, not an im2col; below 16, Slow2d's im2col + GEMM; strided
    convs and the backward keep their measured kinds."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.Conv2d(8, 16, 1),
        nn.Conv2d(16, 16, 3, stride=2, padding=1),
        nn.Flatten(),
        nn.Linear(16 * 16, 10),
    )
    w = measure_workload(net, (3, 8, 8), 16, model_name="convs16")
    table = CallTable.of(w)
    forward = table.phase == FORWARD
    kxk = forward & (table.kind == KIND["conv_kxk"])
    one = forward & (table.kind == KIND["conv1x1"])
    strided = forward & (table.kind == KIND["conv_strided"])
    assert kxk.sum() == one.sum() == strided.sum() == 1

    nnpack = lower(table, "pytorch", 16)
    assert nnpack.kind[kxk] == KIND["conv_kxk"]  # Winograd: winograd_speedup applies
    assert nnpack.flops[kxk] == table.flops[kxk]
    assert nnpack.kind[one] == KIND["conv1x1"] and nnpack.flops[one] == 2 * table.flops[one]
    # Tiles, not an im2col: 3 x 8 x 8 input and 8 x 8 x 8 output floats per image, each
    # covered by 8x8 input tiles of 6x6 outputs ((8/6)^2), and the 1x1's 8 x 8 x 8 input
    # and 16 x 8 x 8 output by 8x8 tiles of 8x8 outputs.
    images = 16 * 4.0
    assert nnpack.unfold[kxk] == approx((8 / 6) ** 2 * images * (3 * 64 + 8 * 64), rel=1e-3)
    assert table.unfold[one] == 0
    assert nnpack.unfold[one] == approx(images * (8 * 64 + 16 * 64), rel=1e-3)
    untouched = strided | ~forward
    for field in ("kind", "flops", "unfold"):
        assert (getattr(nnpack, field)[untouched] == getattr(table, field)[untouched]).all()

    slow = lower(table, "pytorch", 15)
    assert slow.kind[kxk] == KIND["conv_strided"]  # Slow2d: im2col + GEMM, no Winograd
    assert slow.unfold[kxk] == table.unfold[kxk] > 0
    assert (slow.flops == table.flops).all()
    assert (slow.kind[~kxk] == table.kind[~kxk]).all()

    # A build that links oneDNN (x86) convolves through it at every batch: as measured.
    onednn = lower(table, "pytorch", 16, "onednn")
    for field in ("kind", "flops", "unfold"):
        assert (getattr(onednn, field) == getattr(table, field)).all()

    # The same routing for inference (the conv backend is picked per call, not per graph).
    inference = table.select(forward)
    assert (lower(inference, "pytorch", 16).flops == nnpack.select(forward).flops).all()
