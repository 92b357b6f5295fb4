"""FLOPs and operator classes against hand-computed formulas."""

from __future__ import annotations

import torch
from torch import nn

from fedbench.core.workload import OP_CLASSES, OpCost, Workload
from fedbench.measure.opclasses import classify
from fedbench.measure.workload import measure_workload

B = 4


def _measure(model: nn.Module, shape: tuple[int, ...]) -> Workload:
    return measure_workload(model, shape, B, model_name="test", cache=False)


def test_linear_flops_forward_and_backward() -> None:
    # The second Linear's input requires grad, so its backward computes
    # both the weight and the input gradient; the first Linear's input is
    # the batch, so only its weight gradient.
    w = _measure(nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5)), (10,))
    first, second = 2 * B * 10 * 20, 2 * B * 20 * 5
    assert w.forward["dense"].flops == first + second
    assert w.backward["dense"].flops == first + 2 * second
    assert set(w.forward) == set(w.backward) == set(OP_CLASSES)


def test_conv2d_flops_forward_and_backward() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )
    w = _measure(model, (3, 12, 12))
    conv1 = 2 * B * 8 * 3 * 3 * 3 * 12 * 12
    conv2 = 2 * B * 16 * 8 * 3 * 3 * 12 * 12
    linear = 2 * B * 16 * 10
    assert w.forward["dense"].flops == conv1 + conv2 + linear
    assert w.backward["dense"].flops == conv1 + 2 * conv2 + 2 * linear
    assert w.forward["depthwise"].flops == 0


def test_depthwise_conv_is_its_own_class() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 1),
        nn.Conv2d(8, 8, 3, padding=1, groups=8),
        nn.Flatten(),
        nn.Linear(8 * 6 * 6, 2),
    )
    w = _measure(model, (3, 6, 6))
    depthwise = 2 * B * 8 * 3 * 3 * 6 * 6
    assert w.forward["depthwise"].flops == depthwise
    assert w.backward["depthwise"].flops == 2 * depthwise
    assert w.forward["dense"].flops == 2 * B * 8 * 3 * 36 + 2 * B * 288 * 2


def test_grouped_conv_with_fewer_groups_than_channels_is_dense() -> None:
    conv = torch.ops.aten.convolution.default
    x, weight = torch.zeros(1, 8, 4, 4), torch.zeros(8, 2, 3, 3)
    grouped = (x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 4)
    depthwise = (x, torch.zeros(8, 1, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 8)
    assert classify(conv, grouped) == "dense"
    assert classify(conv, depthwise) == "depthwise"


class _Concat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv(x)], dim=1)


def test_cat_is_movement() -> None:
    model = nn.Sequential(nn.Conv2d(2, 4, 1), _Concat(), nn.Flatten(), nn.Linear(8 * 9, 3))
    w = _measure(model, (2, 3, 3))
    inputs = 2 * (B * 4 * 9 * 4)  # two (B, 4, 3, 3) float tensors read
    output = B * 8 * 9 * 4  # one (B, 8, 3, 3) written
    assert w.forward["movement"] == OpCost(0.0, inputs + output)
    assert w.backward["movement"].bytes > 0  # slicing the gradient apart
    assert w.forward["movement"].flops == w.backward["movement"].flops == 0


def test_elementwise_and_optimizer_costs() -> None:
    w = _measure(nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5)), (10,))
    relu, log_softmax, nll = B * 20, 5 * B * 5, B * 5
    assert w.forward["elementwise"].flops == relu + log_softmax + nll
    # SGD with momentum: buf *= m; buf += g; p -= lr * buf, one flop each.
    assert w.optimizer.flops == 3 * w.num_params
    assert w.optimizer.bytes > 0
    adam = measure_workload(
        nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5)),
        (10,),
        B,
        model_name="test",
        optimizer="adam",
        cache=False,
    )
    assert adam.optimizer.flops > w.optimizer.flops


class _Attention(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = x.view(x.shape[0], 2, 8, 4)  # (batch, heads, tokens, dim)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q).flatten(1)


def test_cpu_attention_counts_two_matmuls() -> None:
    model = nn.Sequential(nn.Linear(64, 64), _Attention(), nn.Linear(64, 3))
    w = _measure(model, (64,))
    linears = 2 * B * 64 * 64 + 2 * B * 64 * 3
    scores_and_values = 2 * (2 * B * 2 * 8 * 8 * 4)  # q k^T and p v per head
    assert w.forward["dense"].flops == linears + scores_and_values


def test_windowed_pools_charge_every_tap() -> None:
    # A 7x7 stride-1 average pool reads 49 inputs per output (forward and
    # backward); a 3x3 stride-2 max pool 9 per output forward, while its
    # backward only routes each gradient to its argmax (elements rule).
    model = nn.Sequential(
        nn.Conv2d(2, 4, 1),
        nn.AvgPool2d(7, 1, 3, count_include_pad=False),
        nn.MaxPool2d(3, 2, 1),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 3),
    )
    w = _measure(model, (2, 8, 8))
    avg, maxpool = B * 4 * 8 * 8, B * 4 * 4 * 4  # outputs of each pool
    log_softmax, nll = 5 * B * 3, B * 3
    assert w.forward["elementwise"].flops == 49 * avg + 9 * maxpool + log_softmax + nll
    max_backward = B * 4 * 8 * 8  # the input-sized gradient it writes
    softmax_backward, nll_backward, bias_grad = 3 * B * 3, B * 3, B * 3
    assert w.backward["elementwise"].flops == (
        49 * avg + max_backward + softmax_backward + nll_backward + bias_grad
    )
