"""Each architecture has its reference parameter count and trains for one step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fedbench.models import build_model, input_spec, model_names
from fedbench.models.densenet import DenseNet
from fedbench.models.resnet import ResNet

# Reference counts: torchvision / timm for the zoo models at 1000 classes,
# the frameworks' own sources for the *_mnn variants (see their YAMLs).
REFERENCE_PARAMS = {
    "lenet": 61_706,
    "alexnet": 61_100_840,
    "googlenet": 6_624_904,
    "squeezenet": 1_248_424,
    "squeezenet1_1": 1_235_496,
    "mobilenetv2": 3_504_872,
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "mobilenetv3_small": 2_542_856,
    "vit_tiny": 5_717_416,
    "efficientnet_b0": 5_288_548,
    # MNN: conv 1*20*25+20, 20*50*25+50; linear 800*400+400, 400*10+10.
    "lenet_mnn": 520 + 320_400 + 4_010,  # conv2 (25,050) is constant, as in MNN's source
    "inceptionv1": 6_624_904,  # same network as googlenet
    "xception": 22_855_952,  # Keras/timm trainable parameters
    "vgg16": 138_357_544 - 4096 * 990 - 990,  # torchvision vgg16 with a 10-class head
    "resnet50_cifar": 23_520_842,  # the common CIFAR ResNet50 (3x3 stem, no max-pool)
}

# Heaviest models take their training step at batch 1 to keep the file fast.
BATCH_ONE = {"vgg16", "xception"}


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize(("name", "expected"), sorted(REFERENCE_PARAMS.items()))
def test_parameter_count_matches_reference(name: str, expected: int) -> None:
    module, _ = build_model(name)
    assert _count(module) == pytest.approx(expected, rel=0.01)


def test_densenet40_has_about_one_million_parameters() -> None:
    module, shape = build_model("densenet40")
    assert shape == (3, 32, 32)
    assert 950_000 <= _count(module) <= 1_100_000


def test_densenet_depth_is_configurable() -> None:
    # Huang et al. Table 2: DenseNet (L=100, k=12) has 7.0M parameters.
    assert _count(DenseNet(depth=100, growth_rate=12)) == pytest.approx(7.0e6, rel=0.01)


def test_resnet_cifar_variant_keeps_resolution() -> None:
    model = ResNet((2, 2, 2, 2), bottleneck=False, num_classes=10, cifar_stem=True)
    assert _count(model) == 11_173_962  # the common CIFAR ResNet18
    feats = model.features[:3](torch.randn(1, 3, 32, 32))
    assert feats.shape[-2:] == (32, 32)


def test_small_cnn_accepts_other_sizes_and_channels() -> None:
    module, _ = build_model("small_cnn")
    assert 10_000 <= _count(module) <= 100_000
    from fedbench.models.small_cnn import SmallCNN

    gray = SmallCNN(in_channels=1, num_classes=4)
    assert gray(torch.randn(2, 1, 16, 16)).shape == (2, 4)
    assert gray(torch.randn(2, 1, 28, 28)).shape == (2, 4)


def _watch_trunk_inputs(model: torch.nn.Module) -> list[str]:
    """Record trunk units that modify their input in place.

    The trunk (the model's top-level nn.Sequential children) is what gradient
    checkpointing splits into segments; a unit that overwrote its input would
    corrupt the input a checkpointed segment keeps for its recompute.
    """
    offenders: list[str] = []
    seen: dict[int, tuple[torch.Tensor, int]] = {}

    def before(unit: torch.nn.Module, args: tuple[object, ...]) -> None:
        if args and isinstance(args[0], torch.Tensor):
            seen[id(unit)] = (args[0], args[0]._version)

    def after(unit: torch.nn.Module, args: tuple[object, ...], out: object) -> None:
        tensor, version = seen.pop(id(unit), (None, 0))
        if tensor is not None and tensor._version != version:
            offenders.append(type(unit).__name__)

    for container in model.children():
        if isinstance(container, torch.nn.Sequential):
            for unit in container:
                unit.register_forward_pre_hook(before)
                unit.register_forward_hook(after)
    return offenders


@pytest.mark.parametrize("name", model_names())
def test_one_sgd_step(name: str) -> None:
    torch.manual_seed(0)
    module, _ = build_model(name)
    module.train()
    in_place = _watch_trunk_inputs(module)
    spec = input_spec(name)
    batch = 1 if name in BATCH_ONE else 2
    x = spec.example(batch, torch.Generator().manual_seed(0))
    out = module(x)
    assert out.dim() == 2 and out.shape[0] == batch
    assert not in_place, f"{name}: trunk units modify their input in place: {in_place}"
    target = torch.zeros(batch, dtype=torch.long)
    loss = F.cross_entropy(out, target)
    assert torch.isfinite(loss)
    # A slice of each parameter is enough to see the update (VGG16 has 134M).
    before = [p.detach().flatten()[:4096].clone() for p in module.parameters()]
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    opt.zero_grad()
    loss.backward()
    missing = [n for n, p in module.named_parameters() if p.grad is None]
    assert not missing, f"{name}: parameters without gradient: {missing[:5]}"
    opt.step()
    after = [p.detach().flatten()[:4096] for p in module.parameters()]
    changed = sum(not torch.equal(b, a) for b, a in zip(before, after, strict=True))
    assert changed > 0.9 * len(before)
