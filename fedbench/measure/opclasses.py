"""Which operator class an aten op belongs to, and what it costs.

The emulator's roofline (docs/devices.md, "Devices: profiles and the emulator";
fedbench/devices/kernels.py) times each operator class separately, so
every aten op seen during a training step is put in one class and charged
FLOPs and bytes moved. Classification table:

| class         | aten ops                                                        |
|---------------|-----------------------------------------------------------------|
| "dense"       | ops with a formula in torch.utils.flop_counter: convolution and |
|               | convolution_backward with groups == 1 or groups < in_channels,  |
|               | mm, addmm, bmm, baddbmm, scaled-dot-product attention (+ bwd,   |
|               | including the CPU flash-attention kernels), oneDNN's fused RNN  |
|               | layer (mkldnn_rnn_layer + bwd: nn.LSTM / nn.GRU on x86 CPUs)    |
| "depthwise"   | convolution / convolution_backward with groups == in_channels>1 |
| "movement"    | _MOVEMENT below: cat, stack, clone/copy, index/gather/scatter,  |
|               | pads, *_backward of slicing, fills and zeros, view_copy ops     |
| "elementwise" | everything else: batch/layer/group norm, activations, pooling,  |
|               | add/mul/div, softmax, losses, reductions, optimizer arithmetic, |
|               | embedding_dense_backward (it adds gradient rows into the table) |
| (free)        | views and metadata (is_view: view, t, expand, detach, ...),     |
|               | unsafe_split/unsafe_chunk (views autograd does not track) and   |
|               | allocation without writes (empty*, lift_fresh, .item())         |

An op the table does not know (not pointwise-tagged, not in the known
elementwise families below, or outside the aten namespace, e.g. a custom
or fused kernel) is charged as elementwise - never as free - and warned
about once per process in one line (UncostedOpWarning): a fused kernel's
hidden GEMMs would otherwise go unseen.

Costs:
- FLOPs of dense/depthwise ops come from torch.utils.flop_counter's
  registered formulas (2 x MACs). A convolution's backward is charged the
  forward FLOPs once per gradient it computes (output_mask: input, weight),
  so a frozen weight or the first layer's input costs nothing.
- FLOPs of elementwise ops are `factor x elements touched`, where elements
  touched is the largest numel among the op's tensor inputs and outputs (so
  a reduction is charged for its input, a broadcast add for its output) and
  the factor is 1 unless _FLOPS_PER_ELEMENT says otherwise.
- A windowed pooling call (and an average pool's backward) is charged one
  FLOP per window tap of every output: a 7x7 stride-1 average pool reads
  49 inputs per output, not one (_WINDOWED). A max pool's backward only
  scatters each gradient to its argmax, so it keeps the elements rule.
- A fused RNN layer is charged its GEMMs: 2 x steps x batch x gates x
  hidden x (inputs + hidden) forward, twice that backward (the input and
  weight gradients), plus _RNN_GATE_FLOPS per gate element; its narrowest
  GEMM dimension is the batch (the per-step hidden GEMM).
- Movement ops do no arithmetic (0 FLOPs).
- Bytes are a roofline proxy: bytes of every tensor read (inputs) plus every
  tensor written (outputs and arguments the schema marks as mutated, once
  each). A tensor's bytes are capped by its storage, so a broadcast
  (stride-0) view is charged for the memory it really spans.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import (
    conv_flop_count,
    flop_registry,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

aten = torch.ops.aten

# Pure data movement: copies, concatenation, gathers and memory fills.
_MOVEMENT: frozenset[str] = frozenset(
    {
        "cat", "stack", "clone", "copy", "copy_", "_to_copy", "_copy_from",
        "contiguous", "index", "index_select", "gather", "scatter", "scatter_add",
        "scatter_add_", "scatter_", "index_put", "index_put_", "_unsafe_index",
        "_index_put_impl_", "index_add", "index_add_", "embedding", "constant_pad_nd",
        "reflection_pad1d",
        "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
        "replication_pad2d", "replication_pad3d", "reflection_pad2d_backward",
        "replication_pad2d_backward", "slice_backward", "select_backward",
        "index_select_backward", "unfold_backward", "diagonal_backward",
        "as_strided_scatter", "slice_scatter", "select_scatter", "repeat", "roll",
        "flip", "im2col", "col2im", "zeros", "zeros_like", "ones", "ones_like",
        "full", "full_like", "new_zeros", "new_ones", "new_full", "fill", "fill_",
        "zero_", "masked_scatter", "narrow_copy", "pixel_shuffle", "pixel_unshuffle",
        "channel_shuffle",
    }
)  # fmt: skip

# Ops that only allocate or change metadata (views autograd does not track
# as views, in-place reshapes): no FLOPs, no traffic.
_FREE: frozenset[str] = frozenset(
    {
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
        "lift_fresh", "_local_scalar_dense", "resize_", "set_", "alias", "detach",
        "detach_", "_unsafe_view", "_reshape_alias", "squeeze_", "unsqueeze_",
        "transpose_", "t_", "as_strided_", "swapdims_", "swapaxes_",
        "_record_function_enter_new", "_record_function_exit", "sym_size",
        "sym_stride", "sym_numel", "sym_storage_offset",
        "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk",
    }
)  # fmt: skip

# Arithmetic per touched element where it is clearly above one. Estimates of
# the textbook algorithm, e.g. batch norm forward: sum and sum of squares for
# the statistics (3) plus a fused scale-and-shift (2).
_FLOPS_PER_ELEMENT: dict[str, float] = {
    "native_batch_norm": 5.0,
    "_native_batch_norm_legit": 5.0,
    "_native_batch_norm_legit_functional": 5.0,
    "_native_batch_norm_legit_no_training": 2.0,
    "native_batch_norm_backward": 8.0,
    "native_layer_norm": 5.0,
    "native_layer_norm_backward": 8.0,
    "native_group_norm": 5.0,
    "native_group_norm_backward": 8.0,
    "_softmax": 5.0,
    "_log_softmax": 5.0,
    "_softmax_backward_data": 3.0,
    "_log_softmax_backward_data": 3.0,
    "addcmul": 2.0,
    "addcmul_": 2.0,
    "addcdiv": 2.0,
    "addcdiv_": 2.0,
    "lerp": 2.0,
    "lerp_": 2.0,
    "gelu": 4.0,
    "gelu_backward": 6.0,
    "silu": 4.0,
    "silu_backward": 6.0,
    "sigmoid": 4.0,
    "tanh": 4.0,
    "hardswish": 4.0,
    "hardswish_backward": 4.0,
}

# Windowed pools: op name -> (index of kernel_size, index of the tensor
# whose elements are the windows: the output, or the backward's grad_output).
_WINDOWED: dict[str, tuple[int, int | None]] = {
    "avg_pool2d": (1, None),
    "avg_pool3d": (1, None),
    "max_pool2d_with_indices": (1, None),
    "max_pool3d_with_indices": (1, None),
    "avg_pool2d_backward": (2, 0),
    "avg_pool3d_backward": (2, 0),
}

# Elementwise-class ops without torch's pointwise tag that the table knows
# (reductions, losses, normalisations, softmax, activations' gradients,
# random fills, pools): any other op reaching the elementwise fallback is
# warned about (UncostedOpWarning). Pools are matched by name ("pool").
_KNOWN_ELEMENTWISE: frozenset[str] = frozenset(
    {
        "sum", "mean", "amax", "amin", "max", "min", "var", "std", "var_mean",
        "std_mean", "prod", "norm", "linalg_vector_norm", "argmax", "argmin", "cumsum",
        "logsumexp", "all", "any", "nll_loss_forward", "nll_loss_backward",
        "nll_loss2d_forward", "nll_loss2d_backward", "mse_loss", "mse_loss_backward",
        "binary_cross_entropy", "binary_cross_entropy_backward",
        "binary_cross_entropy_with_logits", "smooth_l1_loss", "smooth_l1_loss_backward",
        "huber_loss", "huber_loss_backward", "_softmax", "_log_softmax",
        "_softmax_backward_data", "_log_softmax_backward_data", "bernoulli", "bernoulli_",
        "rand", "randn", "randint", "rand_like", "randn_like", "normal", "normal_",
        "uniform_", "native_dropout", "native_dropout_backward", "hardswish",
        "hardswish_", "hardswish_backward", "hardsigmoid", "hardsigmoid_",
        "hardsigmoid_backward", "hardtanh", "hardtanh_", "hardtanh_backward",
        "leaky_relu_backward", "elu_backward", "softplus_backward", "gelu_backward",
        "silu_backward", "embedding_dense_backward", "where", "masked_fill",
        "masked_fill_", "clamp", "clamp_", "native_batch_norm",
        "native_batch_norm_backward", "_native_batch_norm_legit",
        "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
        "native_layer_norm", "native_layer_norm_backward", "native_group_norm",
        "native_group_norm_backward",
    }
)  # fmt: skip

# Namespaces whose ops do no work of the model (profiler markers).
_FREE_NAMESPACES: frozenset[str] = frozenset({"profiler"})

# oneDNN's fused RNN layer (nn.LSTM / nn.GRU on an x86 CPU): op name ->
# indices of (input, w_ih, w_hh, hx) and how many GEMM passes it runs
# (forward 1; backward 2: the input and the weight gradients).
_RNN_LAYERS: dict[str, tuple[int, int, int, int, int]] = {
    "mkldnn_rnn_layer": (0, 1, 2, 5, 1),
    "mkldnn_rnn_layer_backward": (0, 1, 2, 5, 2),
}
# Gate arithmetic per gate element and pass: a sigmoid or tanh (4, as
# _FLOPS_PER_ELEMENT) and the cell update's multiply-adds.
_RNN_GATE_FLOPS = 6.0


class UncostedOpWarning(UserWarning):
    """An op the cost table does not know was charged by the elementwise fallback."""


_CONV_OPS: dict[str, tuple[int, int]] = {
    # op name -> (index of the conv input tensor, index of `groups`)
    "convolution": (0, 8),
    "_convolution": (0, 8),
    "convolution_backward": (1, 9),
}


# The shape of a call, finer than its class: frameworks run these with
# different kernels (MNN and NNPACK use Winograd for stride-1 k x k
# convolutions, a 1x1 convolution is a plain GEMM, a strided one needs an
# im2col), so the emulator gives each its own efficiency.
KINDS: tuple[str, ...] = (
    "matmul",  # mm / addmm / bmm / attention
    "conv1x1",  # 1x1 convolution (a GEMM over pixels)
    "conv_kxk",  # k x k (k > 1) convolution, stride 1, no dilation: Winograd-able
    "conv_strided",  # any other dense convolution (strided, dilated, transposed)
    "depthwise",
    "elementwise",
    "movement",
    # Elementwise-class kernels that do more per element than stream it, so
    # the emulator charges them cycles per element written on top:
    "pool",  # max/average pools and their backward (window bounds, argmax, divisors)
    "norm",  # batch/layer/group norm and their backward (per-channel statistics passes)
)


# Aten ops a framework may run as several kernels of its own: the call table
# records which of these a call is (index; 0 is every other op), so the
# emulator can lower the call the way that framework's graph does
# (fedbench/devices/lowering.py). The measurement itself stays PyTorch's.
NAMED_OPS: tuple[str, ...] = (
    "",
    "threshold_backward",  # ReLU's gradient
    "hardtanh_backward",  # ReLU6's (a hardtanh on [0, 6])
    "native_batch_norm",  # training-mode batch norm
    "native_batch_norm_backward",
    # The weight-gradient part of a depthwise convolution_backward (call_parts).
    "convolution_backward.depthwise_weight",
)
DEPTHWISE_WEIGHT_GRAD = NAMED_OPS.index("convolution_backward.depthwise_weight")


@dataclass(frozen=True)
class OpCharge:
    """What one call of one aten op costs; `op_class` None means free."""

    op_class: str | None
    flops: float
    bytes: float
    kind: str | None = None  # one of KINDS (None when free)
    # Smallest GEMM dimension of a dense/depthwise call (0 otherwise): a
    # GEMM this thin cannot fill the register tiles (a batch-1 linear layer
    # is a matrix-vector product), whatever its FLOPs.
    narrow: float = 0.0
    # Elements the call writes: the independent outputs its threads split.
    # A weight gradient reduces over the whole batch into a weight-sized
    # output, so it parallelises like its output, not like its FLOPs.
    outputs: float = 0.0
    # Bytes of the im2col matrix a GEMM-based convolution materialises
    # (input channels x kernel taps x output pixels; 0 for a 1x1 stride-1
    # convolution, which is a GEMM on the input itself, and for non-convs).
    # Frameworks that unfold (MNN's backward Raster, PyTorch's slow_conv2d)
    # write and read it; Winograd and direct kernels do not.
    unfold: float = 0.0
    # Bytes of parameters (and weight gradients) the call reads or writes:
    # the same at any batch size. Frameworks that repack or transform
    # weights per call (Winograd, NC4HW4 packing) pay for these every step.
    weights: float = 0.0
    op: int = 0  # index into NAMED_OPS
    taps: float = 0.0  # kernel taps (kh x kw) of a convolution call, 0 otherwise


_NO_CHARGE = OpCharge(None, 0.0, 0.0)


def _tensors(tree: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes an op touches reading or writing `t`, capped by its storage."""
    logical = t.numel() * t.element_size()
    if t.device.type == "meta":
        return logical
    return min(logical, t.untyped_storage().nbytes())


def _mutated(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[Any]:
    out: list[Any] = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            out.append(args[i] if i < len(args) else kwargs.get(arg.name))
    return out


def _unique(tensors: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    seen: set[int] = set()
    kept = []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            kept.append(t)
    return kept


def _elements_touched(
    func: torch._ops.OpOverload, reads: list[torch.Tensor], writes: list[torch.Tensor]
) -> int:
    # A foreach op is one kernel over a list of tensors: it touches them all.
    if func._overloadpacket.__name__.startswith("_foreach_"):
        return sum(t.numel() for t in (writes or reads))
    return max((t.numel() for t in reads + writes), default=0)


def _conv_backward_flops(args: tuple[Any, ...]) -> float:
    # Each requested gradient (input, weight) does one multiply-add per
    # forward multiply-add. flop_counter's own backward formula ignores
    # `groups` for the weight gradient, overcounting a depthwise conv by
    # its channel count.
    grad_out, x, w = args[0], args[1], args[2]
    transposed, mask = bool(args[7]), args[10]
    forward = conv_flop_count(list(x.shape), list(w.shape), list(grad_out.shape), transposed)
    return float(forward * (int(mask[0]) + int(mask[1])))


def _window_flops(name: str, args: tuple[Any, ...], out: Any) -> float:
    """One FLOP per window tap of every output of a windowed pool (_WINDOWED)."""
    kernel_index, windows_index = _WINDOWED[name]
    x = args[0]
    kernel = [int(k) for k in args[kernel_index]]
    spatial = x.dim() - 2 if x.dim() > 2 else 1  # (N, C, *spatial) or (C, *spatial)
    if len(kernel) == 1:  # one size for every spatial dimension
        kernel = kernel * spatial
    windows = _tensors(out)[0] if windows_index is None else args[windows_index]
    return float(math.prod(kernel) * windows.numel())


def _cpu_attention_flops(func: torch._ops.OpOverload, args: tuple[Any, ...]) -> float:
    # The CPU flash-attention kernels have no formula in flop_counter; use
    # its scaled-dot-product counts on the same shapes.
    shapes = [list(t.shape) for t in args[:4]]
    if func._overloadpacket is aten._scaled_dot_product_flash_attention_for_cpu:
        return float(sdpa_flop_count(*shapes[:3]))
    return float(sdpa_backward_flop_count(*shapes))


_CPU_ATTENTION = (
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
)


def _rnn_dims(name: str, args: tuple[Any, ...]) -> tuple[int, int, int, int, int]:
    """(rows = steps x batch, gate rows, inputs, hidden, batch) of a fused RNN layer call.

    Read from the weights' shapes (w_ih: gates x hidden by inputs, w_hh: by
    hidden), so LSTM (4 gates) and GRU (3) need no mode table.
    """
    x_i, ih_i, hh_i, hx_i, _ = _RNN_LAYERS[name]
    w_ih, w_hh, hx = args[ih_i], args[hh_i], args[hx_i]
    gates, inputs, hidden = int(w_ih.shape[0]), int(w_ih.shape[1]), int(w_hh.shape[1])
    rows = args[x_i].numel() // max(1, inputs)
    return rows, gates, inputs, hidden, hx.numel() // max(1, hidden)


def _rnn_flops(name: str, args: tuple[Any, ...]) -> float:
    """GEMM and gate FLOPs of a fused RNN layer call (module docstring)."""
    rows, gates, inputs, hidden, _ = _rnn_dims(name, args)
    passes = _RNN_LAYERS[name][4]
    gemm = 2.0 * rows * gates * (inputs + hidden)
    return passes * (gemm + _RNN_GATE_FLOPS * rows * gates)


def _known_elementwise(func: torch._ops.OpOverload) -> bool:
    """Whether the elementwise fallback's rule (FLOPs per element touched) fits `func`."""
    name = func._overloadpacket.__name__
    return func.namespace == "aten" and (
        torch.Tag.pointwise in func.tags
        or name in _KNOWN_ELEMENTWISE
        or name in _FLOPS_PER_ELEMENT
        or name.startswith("_foreach_")
        or "pool" in name
    )


def _warn_uncosted(func: torch._ops.OpOverload) -> None:
    """One line, once per op and process (the warnings registry), for an op without a rule."""
    warnings.warn(
        f"fedbench.measure: no cost rule for {func.name()}; charged as elementwise "
        "(1 FLOP per element touched, plus its bytes), so any GEMM it fuses is undercounted",
        UncostedOpWarning,
        stacklevel=2,
    )


def classify(func: torch._ops.OpOverload, args: tuple[Any, ...]) -> str | None:
    """The op class of one call (None = free); see the module table."""
    name = func._overloadpacket.__name__
    if func.namespace in _FREE_NAMESPACES or func.is_view or name in _FREE:
        return None
    if func.namespace != "aten":
        return "elementwise"  # a custom kernel: warned about by `charge`
    if name in _CONV_OPS:
        x_index, groups_index = _CONV_OPS[name]
        groups = int(args[groups_index])
        channels = int(args[x_index].shape[1])
        return "depthwise" if 1 < groups == channels else "dense"
    if func._overloadpacket in flop_registry or func._overloadpacket in _CPU_ATTENTION:
        return "dense"
    if name in _RNN_LAYERS:
        return "dense"
    if name in _MOVEMENT or torch.Tag.view_copy in func.tags:
        return "movement"
    return "elementwise"


def _conv_kind(func: torch._ops.OpOverload, args: tuple[Any, ...]) -> str:
    # convolution(input, weight, bias, stride, padding, dilation, transposed, ...)
    # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding,
    # dilation, transposed, ...): the backward call has the forward's shape.
    first = 1 if func._overloadpacket is aten.convolution_backward else 0
    weight = args[first + 1]
    stride, dilation, transposed = args[first + 3], args[first + 5], args[first + 6]
    spatial = list(weight.shape[2:])
    if transposed or any(int(d) != 1 for d in dilation):
        return "conv_strided"
    if all(int(k) == 1 for k in spatial):
        return "conv1x1"
    return "conv_kxk" if all(int(s) == 1 for s in stride) else "conv_strided"


def _taps(weight: torch.Tensor) -> int:
    """Kernel taps (kh x kw) of a convolution's weight; 1 for a linear layer's."""
    return int(weight[0, 0].numel()) if weight.dim() > 2 else 1


def _gemm_dims(
    weight: torch.Tensor, groups: int, pixels_in: int, pixels_out: int
) -> dict[str, float]:
    """Narrowest GEMM dimension of a convolution's forward, input-grad and weight-grad GEMMs."""
    cout = max(1, int(weight.shape[0]) // groups)
    cin = max(1, int(weight.shape[1]))  # per group
    taps = _taps(weight)
    return {
        "forward": float(min(pixels_out, cout, cin * taps)),
        "input": float(min(pixels_in, cin, cout * taps)),
        "weight": float(min(cout, cin * taps, pixels_out)),
    }


def _unfold_bytes(weight: torch.Tensor, groups: int, pixels_out: int, stride: Any) -> float:
    taps = _taps(weight)
    if taps == 1 and all(int(s) == 1 for s in stride):
        return 0.0
    return 4.0 * groups * int(weight.shape[1]) * taps * pixels_out


def _pixels(t: torch.Tensor) -> int:
    """Rows of a convolution's GEMM: batch x spatial positions."""
    return t.numel() // max(1, int(t.shape[1])) if t.dim() > 1 else 1


def _matmul_narrow(func: torch._ops.OpOverload, args: tuple[Any, ...]) -> float:
    name = func._overloadpacket.__name__
    if name in _RNN_LAYERS:  # the per-step hidden GEMM: batch x hidden by gates x hidden
        _, gates, _, hidden, batch = _rnn_dims(name, args)
        return float(min(batch, hidden, gates))
    mats = [t for t in args if isinstance(t, torch.Tensor) and t.dim() >= 2]
    if func._overloadpacket in (aten.mm, aten.bmm) and len(mats) >= 2:
        a, b = mats[0], mats[1]
    elif func._overloadpacket in (aten.addmm, aten.baddbmm) and len(mats) >= 2:
        a, b = mats[-2], mats[-1]
    elif mats and mats[0].dim() == 4:  # attention: (batch, heads, length, head dim)
        return float(min(mats[0].shape[-2], mats[0].shape[-1]))
    else:
        return 0.0
    return float(min(a.shape[-2], a.shape[-1], b.shape[-1]))


def call_parts(
    func: torch._ops.OpOverload,
    args: tuple[Any, ...],
    out: Any,
    total: OpCharge,
    params: frozenset[int] = frozenset(),
) -> tuple[OpCharge, ...]:
    """The GEMM-shaped pieces of one charged call, with their shape features.

    A convolution's backward is two GEMMs of different shapes (the input
    gradient, the weight gradient): it becomes two parts, each with its
    share of the FLOPs and the bytes it reads and writes. Every other call
    is one part, `total` with its narrowest dimension and the bytes of its
    operands whose storage is in `params` (ids of parameter storages) filled in.
    """
    name = func._overloadpacket.__name__
    if total.op_class not in ("dense", "depthwise"):
        return (total,)
    if name not in _CONV_OPS:
        weights = sum(
            tensor_bytes(t) for t in _unique(_tensors(args)) if id(t.untyped_storage()) in params
        )
        return (replace(total, narrow=_matmul_narrow(func, args), weights=float(weights)),)
    groups = int(args[_CONV_OPS[name][1]])
    if func._overloadpacket is not aten.convolution_backward:
        x, w = args[0], args[1]
        dims = _gemm_dims(w, groups, _pixels(x), _pixels(out))
        unfold = _unfold_bytes(w, groups, _pixels(out), args[3])
        taps = float(_taps(w))
        return (
            replace(
                total,
                narrow=dims["forward"],
                unfold=unfold,
                weights=float(tensor_bytes(w)),
                taps=taps,
            ),
        )
    grad_out, x, w, mask = args[0], args[1], args[2], args[10]
    dims = _gemm_dims(w, groups, _pixels(x), _pixels(grad_out))
    unfold = _unfold_bytes(w, groups, _pixels(grad_out), args[4])
    go, xb, wb = tensor_bytes(grad_out), tensor_bytes(x), tensor_bytes(w)
    taps = float(_taps(w))
    weight_op = DEPTHWISE_WEIGHT_GRAD if total.op_class == "depthwise" else 0
    pieces = []
    if mask[0]:  # grad_input: reads grad_out and the weight, writes an input-sized tensor
        pieces.append((go + wb + xb, dims["input"], float(x.numel()), 0))
    if mask[1]:  # grad_weight: reads grad_out and the input, writes a weight-sized tensor
        pieces.append((go + xb + wb, dims["weight"], float(w.numel()), weight_op))
    if not pieces:
        return (total,)
    share = 1.0 / len(pieces)  # each gradient costs one forward's FLOPs
    moved = sum(b for b, _, _, _ in pieces)
    return tuple(
        replace(
            total,
            flops=total.flops * share,
            bytes=total.bytes * b / moved,
            narrow=n,
            outputs=o,
            unfold=unfold,
            weights=float(wb),
            op=op,
            taps=taps,
        )
        for b, n, o, op in pieces
    )


def kind_of(func: torch._ops.OpOverload, args: tuple[Any, ...], op_class: str) -> str:
    """The call's shape kind (KINDS) within its class."""
    name = func._overloadpacket.__name__
    if op_class == "elementwise" and "pool" in name:
        return "pool"
    if op_class == "elementwise" and name.startswith(("native_", "_native_")) and "_norm" in name:
        return "norm"
    if op_class != "dense":
        return op_class
    if func._overloadpacket.__name__ in _CONV_OPS:
        return _conv_kind(func, args)
    return "matmul"


def charge(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> OpCharge:
    """FLOPs and bytes of one executed call `out = func(*args, **kwargs)`."""
    op_class = classify(func, args)
    if op_class is None:
        return _NO_CHARGE
    reads = _unique(_tensors((args, kwargs)))
    writes = _unique(_tensors(out) + _tensors(_mutated(func, args, kwargs)))
    moved = float(sum(tensor_bytes(t) for t in reads) + sum(tensor_bytes(t) for t in writes))
    if func._overloadpacket is aten.convolution_backward:
        flops = _conv_backward_flops(args)
    elif func._overloadpacket in _CPU_ATTENTION:
        flops = _cpu_attention_flops(func, args)
    elif func._overloadpacket.__name__ in _RNN_LAYERS:
        flops = _rnn_flops(func._overloadpacket.__name__, args)
    elif op_class in ("dense", "depthwise"):
        formula = flop_registry[func._overloadpacket]
        flops = float(formula(*args, **kwargs, out_val=out))
    elif op_class == "movement":
        flops = 0.0
    elif func._overloadpacket.__name__ in _WINDOWED:
        flops = _window_flops(func._overloadpacket.__name__, args, out)
    else:
        if not _known_elementwise(func):
            _warn_uncosted(func)
        touched = _elements_touched(func, reads, writes)
        flops = _FLOPS_PER_ELEMENT.get(func._overloadpacket.__name__, 1.0) * touched
    outputs = float(sum(t.numel() for t in writes))
    name = func._overloadpacket.__name__
    op = NAMED_OPS.index(name) if name in NAMED_OPS else 0
    return OpCharge(op_class, flops, moved, kind_of(func, args, op_class), outputs=outputs, op=op)
