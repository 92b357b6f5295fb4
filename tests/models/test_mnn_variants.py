"""The *_mnn zoo models are the networks MNN's benchmark source builds, quirks included."""

from __future__ import annotations

import torch

from fedbench.models import build_model
from fedbench.models.googlenet import Inception


def _inception_inputs(model: torch.nn.Module) -> list[int]:
    sizes: list[int] = []
    hooks = [
        m.register_forward_pre_hook(lambda _m, args: sizes.append(args[0].shape[-1]))
        for m in model.modules()
        if isinstance(m, Inception)
    ]
    model(torch.zeros(1, 3, 224, 224))
    for h in hooks:
        h.remove()
    return sizes


def test_googlenet_mnn_runs_its_inceptions_on_a_quarter_of_the_papers_maps() -> None:
    # MNN's GoogLeNet.cpp reuses conv1's stride-2 options for the 3x3 stem conv.
    mnn, _ = build_model("googlenet_mnn")
    paper, _ = build_model("googlenet")
    assert _inception_inputs(mnn) == [14, 14, 7, 7, 7, 7, 7, 4, 4]
    assert _inception_inputs(paper) == [28, 28, 14, 14, 14, 14, 14, 7, 7]
    assert not any(isinstance(m, torch.nn.ReLU) for m in mnn.modules())


def test_lenet_mnn_never_trains_its_second_conv() -> None:
    # MNN's Lenet.cpp leaves conv2 out of registerModel: the optimizer never sees it.
    model, _ = build_model("lenet_mnn")
    conv1, conv2 = (m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert {n for n, _ in conv2.named_buffers()} == {"weight", "bias"}
    assert not list(conv2.parameters())
    before1, before2 = conv1.weight.detach().clone(), conv2.weight.clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(4, 1, 28, 28)).logsumexp(1).mean()
    loss.backward()
    opt.step()
    assert not torch.equal(conv1.weight, before1)  # gradients flow through conv2
    assert torch.equal(conv2.weight, before2)
    assert "features.3.weight" in model.state_dict()  # still saved and sent with the model
