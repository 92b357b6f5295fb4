"""The measurement on the model zoo, against published operation counts."""

from __future__ import annotations

from fedbench.measure.peak import measured_peak_memory
from fedbench.measure.workload import measure_workload
from fedbench.models import build_model, input_spec


def _macs(forward_flops: float) -> float:
    return forward_flops / 2


def test_resnet18_forward_matches_published_multiply_adds() -> None:
    # torchvision's ResNet18 at 224x224: 1.814 GMACs (reported as "1.81 GFLOPS").
    model, shape = build_model("resnet18")
    w = measure_workload(model, shape, 1, model_name="resnet18", cache=False)
    assert abs(_macs(w.forward["dense"].flops) - 1.814e9) < 0.005 * 1.814e9
    assert w.forward["depthwise"].flops == 0
    assert w.num_params == 11_689_512


def test_mobilenetv2_forward_matches_published_multiply_adds() -> None:
    # MobileNetV2 1.0 at 224x224: ~300M multiply-adds (Sandler et al. 2018).
    model, shape = build_model("mobilenetv2")
    w = measure_workload(model, shape, 1, model_name="mobilenetv2", cache=False)
    convs = w.forward["dense"].flops + w.forward["depthwise"].flops
    assert abs(_macs(convs) - 300e6) < 0.02 * 300e6
    assert 0 < w.forward["depthwise"].flops < w.forward["dense"].flops
    assert w.backward["depthwise"].flops == 2 * w.forward["depthwise"].flops


def test_densenet40_concatenation_checkpointing_and_peak() -> None:
    model, shape = build_model("densenet40")
    full = measure_workload(model, shape, 4, model_name="densenet40", cache=False)
    assert full.forward["movement"].bytes > 0  # the dense connectivity is torch.cat
    ckpt = measure_workload(
        model, shape, 4, model_name="densenet40", checkpoint_segments=4, cache=False
    )
    assert ckpt.saved_activation_bytes < full.saved_activation_bytes / 5
    assert ckpt.peak_bytes < full.peak_bytes
    measured = measured_peak_memory(model, shape, 4, checkpoint_segments=4)
    assert abs(ckpt.peak_bytes - measured) <= 0.15 * measured


def test_token_inputs_and_fine_tuning() -> None:
    spec = input_spec("char_cnn_lstm")
    model, shape = build_model("char_cnn_lstm")
    w = measure_workload(
        model,
        shape,
        2,
        model_name="char_cnn_lstm",
        input_dtype=spec.dtype,
        input_high=spec.high,
        trainable="last:1",
        cache=False,
    )
    assert w.input_bytes == 2 * 80 * 8 + 2 * 8  # int64 ids and targets
    assert w.forward["movement"].bytes > 0  # the embedding lookup
    head = sum(p.numel() for p in list(model.parameters())[-2:])
    assert w.grad_bytes == 4 * head
