"""Plan execution: exact gradients without BatchNorm; documented BatchNorm behaviour."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fedbench.core.plans import FULL, Plan
from fedbench.measure.checkpointing import apply_checkpointing
from fedbench.train.execute import PlanRunner
from tests.train.nets import Trunked, batch, sequential_net

PLANS = [Plan(4), Plan(1, 3), Plan(4, 3), Plan(16, 8), Plan(2, 2)]


def _step(
    net: nn.Module, plan: Plan, x: torch.Tensor, y: torch.Tensor, bs: int, **kw: bool
) -> tuple[nn.Module, float]:
    """A copy of `net` after one SGD (momentum, weight decay) step under `plan`."""
    net = copy.deepcopy(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    loss = PlanRunner(net, opt, nn.CrossEntropyLoss(), **kw).step(x, y, plan, bs)
    return net, loss


def _grads(net: nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in net.parameters() if p.grad is not None]


def _close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float = 1e-6) -> bool:
    return len(a) == len(b) and all(
        torch.allclose(u, v, atol=atol, rtol=1e-5) for u, v in zip(a, b, strict=False)
    )


@pytest.mark.parametrize("make", [lambda: Trunked(norm=False), sequential_net])
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.name(16))
def test_plan_gradients_equal_full_batch_without_batchnorm(make: type, plan: Plan) -> None:
    torch.manual_seed(0)
    net = make()
    x, y = batch(16)
    full, full_loss = _step(net, FULL, x, y, 16)
    planned, loss = _step(net, plan, x, y, 16)
    assert loss == pytest.approx(full_loss, rel=1e-5)
    assert _close(_grads(planned), _grads(full))
    # The update (momentum, weight decay) follows: same weights after the step.
    assert _close(list(planned.parameters()), list(full.parameters()))


def test_model_is_restored_after_checkpointing() -> None:
    net = Trunked(norm=True)
    keys = list(net.state_dict())
    x, y = batch(8)
    planned, _ = _step(net, Plan(2, 3), x, y, 8)
    assert type(planned.features) is nn.Sequential
    assert list(planned.state_dict()) == keys


def test_short_last_step_is_exact() -> None:
    torch.manual_seed(1)
    net = Trunked(norm=False)
    x, y = batch(20)  # the epoch's last step at batch size 32
    full, _ = _step(net, FULL, x, y, 32)
    planned, _ = _step(net, Plan(8, 2), x, y, 32)  # 8 x 4 -> 5 slices of 4
    assert _close(_grads(planned), _grads(full))


def test_batchnorm_micro_batches_use_their_own_statistics() -> None:
    """Documented: the gradient is the sum of per-micro-batch gradients, not the full-batch one."""
    torch.manual_seed(2)
    net = Trunked(norm=True)
    x, y = batch(16)
    full, _ = _step(net, FULL, x, y, 16)
    planned, _ = _step(net, Plan(4), x, y, 16)
    assert not _close(_grads(planned), _grads(full), atol=1e-4)
    # Each slice normalised alone, its loss weighted 1/4: the accumulated sum.
    expected = None
    for xs, ys in zip(x.chunk(4), y.chunk(4), strict=True):
        alone, _ = _step(net, FULL, xs, ys, 4)
        g = [v / 4 for v in _grads(alone)]
        expected = g if expected is None else [a + b for a, b in zip(expected, g, strict=True)]
    assert expected is not None and _close(_grads(planned), expected)


def test_batchnorm_running_stats_update_once_per_micro_batch() -> None:
    torch.manual_seed(3)
    net = Trunked(norm=True)
    x, y = batch(16)
    planned, _ = _step(net, Plan(4), x, y, 16)
    norm = planned.features[1]
    assert int(norm.num_batches_tracked) == 4
    # Four consecutive updates, one per slice, as a plain BatchNorm does.
    ref = copy.deepcopy(net)
    ref.train()
    with torch.no_grad():
        for xs in x.chunk(4):
            ref(xs)
    assert torch.allclose(norm.running_mean, ref.features[1].running_mean, atol=1e-6)
    assert torch.allclose(norm.running_var, ref.features[1].running_var, atol=1e-6)


def test_scaled_momentum_keeps_the_full_batch_horizon() -> None:
    torch.manual_seed(4)
    net = Trunked(norm=True)
    xs, ys = batch(4)
    x, y = xs.repeat(4, 1, 1, 1), ys.repeat(4)  # four identical slices: equal slice means
    full, _ = _step(net, FULL, x, y, 16)
    scaled, _ = _step(net, Plan(4), x, y, 16, bn_momentum_scaled=True)
    plain, _ = _step(net, Plan(4), x, y, 16)
    first = (full.features[1], scaled.features[1], plain.features[1])
    assert torch.allclose(first[1].running_mean, first[0].running_mean, atol=1e-6)
    assert not torch.allclose(first[2].running_mean, first[0].running_mean, atol=1e-4)
    assert first[1].momentum == pytest.approx(0.1)  # restored after the step


def test_checkpoint_recompute_does_not_update_running_stats_twice() -> None:
    torch.manual_seed(5)
    net = Trunked(norm=True)
    x, y = batch(8)
    full, _ = _step(net, FULL, x, y, 8)
    planned, _ = _step(net, Plan(1, 4), x, y, 8)
    for a, b in zip(full.buffers(), planned.buffers(), strict=True):
        assert torch.allclose(a.float(), b.float(), atol=1e-6)
    assert int(planned.features[1].num_batches_tracked) == 1
    assert _close(_grads(planned), _grads(full), atol=1e-5)


def test_plain_checkpoint_would_update_twice() -> None:
    """Why the freeze exists: torch's recompute re-runs BatchNorm in training mode."""
    net = Trunked(norm=True)
    run, _ = apply_checkpointing(copy.deepcopy(net), 4)
    x, y = batch(8)
    nn.CrossEntropyLoss()(run(x), y).backward()
    assert int(run.features.inner[1].num_batches_tracked) == 2


def test_checkpointed_dropout_recomputes_the_same_masks() -> None:
    net = Trunked(norm=False, dropout=0.3)
    x, y = batch(8)
    torch.manual_seed(6)
    full, _ = _step(net, FULL, x, y, 8)
    torch.manual_seed(6)
    planned, _ = _step(net, Plan(1, 4), x, y, 8)
    assert _close(_grads(planned), _grads(full))
