"""Memory terms of the workload, plans, and the prediction against a measured peak."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.errors import FedbenchError
from fedbench.measure.peak import measured_peak_memory
from fedbench.measure.workload import measure_workload

B = 8


def _mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))


def _convnet() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 1, bias=False),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def test_saved_bytes_of_small_net_match_hand_count() -> None:
    w = measure_workload(_mlp(), (10,), B, model_name="mlp", cache=False)
    # ReLU saves its output (also the second Linear's saved input: one
    # storage); log_softmax saves its output; nll_loss its scalar total
    # weight. The batch and the weights are memory terms of their own.
    assert w.saved_activation_bytes == B * 20 * 4 + B * 5 * 4 + 4
    assert w.num_params == 10 * 20 + 20 + 20 * 5 + 5
    assert w.param_bytes == w.grad_bytes == w.optimizer_state_bytes == 4 * w.num_params
    assert w.input_bytes == B * 10 * 4 + B * 8  # float inputs, int64 targets
    assert w.peak_bytes >= w.param_bytes + w.saved_activation_bytes


def test_checkpointing_trades_saved_bytes_for_recompute() -> None:
    full = measure_workload(_convnet(), (3, 16, 16), B, model_name="c", cache=False)
    ckpt = measure_workload(
        _convnet(), (3, 16, 16), B, model_name="c", checkpoint_segments=2, cache=False
    )
    assert ckpt.saved_activation_bytes < full.saved_activation_bytes / 2
    for op_class in ("dense", "depthwise", "elementwise"):
        assert ckpt.backward[op_class].flops > full.backward[op_class].flops
    assert ckpt.forward == full.forward


def test_microbatching_divides_saved_activations() -> None:
    full = measure_workload(_mlp(), (10,), B, model_name="mlp", cache=False)
    halves = measure_workload(_mlp(), (10,), B, model_name="mlp", microbatches=2, cache=False)
    assert halves.saved_activation_bytes == (B // 2) * 20 * 4 + (B // 2) * 5 * 4 + 4
    assert halves.steps_per_update == 2
    # Same arithmetic, but each micro-batch reads the weights again.
    assert halves.forward["dense"].flops == full.forward["dense"].flops
    assert halves.backward["dense"].flops == full.backward["dense"].flops
    assert halves.forward["dense"].bytes > full.forward["dense"].bytes


def test_fine_tuning_last_layers_freezes_the_rest() -> None:
    full = measure_workload(_convnet(), (3, 16, 16), B, model_name="c", cache=False)
    last = measure_workload(
        _convnet(), (3, 16, 16), B, model_name="c", trainable="last:1", cache=False
    )
    head = 32 * 10 + 10
    assert last.grad_bytes == last.optimizer_state_bytes == 4 * head
    assert last.num_params == full.num_params
    # Backward stops at the head: no conv gradient at all.
    assert last.backward["depthwise"].flops == 0
    assert last.backward["dense"].flops == 2 * B * 32 * 10  # the head's weight gradient
    assert last.saved_activation_bytes < full.saved_activation_bytes / 10


def test_invalid_arguments_name_the_key() -> None:
    with pytest.raises(FedbenchError, match="trainable='last:9'"):
        measure_workload(_mlp(), (10,), B, model_name="mlp", trainable="last:9", cache=False)
    with pytest.raises(FedbenchError, match="adam, adamw, sgd, sgd_momentum"):
        measure_workload(_mlp(), (10,), B, model_name="mlp", optimizer="lion", cache=False)
    with pytest.raises(FedbenchError, match="microbatches=3"):
        measure_workload(_mlp(), (10,), B, model_name="mlp", microbatches=3, cache=False)
    with pytest.raises(FedbenchError, match="checkpoint_segments=4"):
        measure_workload(_mlp(), (10,), B, model_name="mlp", checkpoint_segments=4, cache=False)


@pytest.mark.parametrize(
    ("model", "shape"), [(_mlp(), (10,)), (_convnet(), (3, 16, 16))], ids=["mlp", "convnet"]
)
def test_predicted_peak_within_15_percent_of_measured(
    model: nn.Module, shape: tuple[int, ...]
) -> None:
    for batch in (8, 32):
        predicted = measure_workload(model, shape, batch, model_name="m", cache=False).peak_bytes
        measured = measured_peak_memory(model, shape, batch)
        assert abs(predicted - measured) <= 0.15 * measured, (batch, predicted, measured)


def test_measured_peak_grows_with_batch_and_shrinks_with_a_plan() -> None:
    small = measured_peak_memory(_convnet(), (3, 16, 16), 8)
    large = measured_peak_memory(_convnet(), (3, 16, 16), 32)
    planned = measured_peak_memory(_convnet(), (3, 16, 16), 32, microbatches=4)
    assert small < planned < large
    assert torch.get_num_threads() == 1


def test_frozen_checkpointed_segments_keep_nothing() -> None:
    # Only the head trains. Of the three segments (units 0-3, 4-7, 8-10)
    # the frozen ones see no gradient, keep nothing and are not recomputed;
    # the head's segment keeps its (8, 32, 16, 16) input, and its recompute
    # re-runs the pooling but stops before the Linear (torch's checkpoint
    # stops once every tensor the backward needs is back).
    last = measure_workload(
        _convnet(), (3, 16, 16), B, model_name="c", trainable="last:1", cache=False
    )
    both = measure_workload(
        _convnet(),
        (3, 16, 16),
        B,
        model_name="c",
        trainable="last:1",
        checkpoint_segments=3,
        cache=False,
    )
    loss = B * 10 * 4 + 4  # log_softmax output, nll total weight
    assert last.saved_activation_bytes == B * 32 * 4 + loss
    assert both.saved_activation_bytes == B * 32 * 16 * 16 * 4 + loss
    head = 2 * B * 32 * 10
    assert last.backward["dense"].flops == head
    assert both.backward["dense"].flops == head
    assert both.backward["elementwise"].flops > last.backward["elementwise"].flops
    assert both.backward["depthwise"].flops == 0
