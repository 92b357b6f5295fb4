"""audio_cnn: its parameter count, its input shape, one training step on log-mel features."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fedbench.errors import FedbenchError
from fedbench.models import build_model, input_spec, model_config
from fedbench.models.audio_cnn import AudioCNN
from fedbench.models.width import width_rule


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_parameter_count_and_shape() -> None:
    module, shape = build_model("audio_cnn")
    assert shape == (1, 40, 101)  # data=speech_commands' features
    widths = [1, 32, 64, 128, 128]
    convs = sum(a * b * 9 + 2 * b for a, b in zip(widths, widths[1:], strict=False))  # + BN
    assert _count(module) == convs + 128 * 35 + 35 == 245_123
    assert module(torch.randn(2, *shape)).shape == (2, 35)


def test_num_classes_follows_the_data_and_other_lengths_work() -> None:
    module, shape = build_model("audio_cnn", num_classes=12)
    assert module(torch.randn(2, *shape)).shape == (2, 12)
    assert AudioCNN(num_classes=4)(torch.randn(2, 1, 64, 51)).shape == (2, 4)
    with pytest.raises(FedbenchError, match="widths"):
        AudioCNN(widths=())


def test_one_sgd_step_changes_every_parameter() -> None:
    torch.manual_seed(0)
    module, _ = build_model("audio_cnn")
    x = input_spec("audio_cnn").example(4, torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in module.parameters()]
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    F.cross_entropy(module(x), torch.arange(4)).backward()
    assert all(p.grad is not None for p in module.parameters())
    opt.step()
    assert all(not torch.equal(b, p) for b, p in zip(before, module.parameters(), strict=True))


def test_submodels_are_refused_in_one_line() -> None:
    with pytest.raises(FedbenchError, match="no width rule") as err:
        width_rule(model_config("audio_cnn"))
    assert "\n" not in str(err.value)
