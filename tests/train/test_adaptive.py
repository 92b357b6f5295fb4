"""Re-planning between optimizer steps when the memory budget changes mid-round."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from fedbench.core.plans import FULL, Plan, PlanLog
from fedbench.data.source import Tensors
from fedbench.train.adaptive import Adaptation, memoised
from fedbench.train.loop import TrainParams, step_sizes, train_local
from fedbench.train.planner import PlanChoice, choose_plan
from tests.train.nets import Trunked, batch

PARAMS = TrainParams(batch_size=8, local_epochs=2, lr=0.05, momentum=0.9, weight_decay=5e-4)
SMALL = Plan(4, 3)


def _choice(plan: Plan, feasible: bool = True, reason: str = "") -> PlanChoice:
    return PlanChoice(plan, 8, 0.0, 0.0, 0.0, feasible, reason, "proxy", ())


def _fake_planner(budget: float) -> PlanChoice:
    """100 MB: the full batch fits; 10 MB: only SMALL; below: nothing."""
    if budget >= 100:
        return _choice(FULL)
    if budget >= 10:
        return _choice(SMALL)
    return _choice(Plan(8, 3), False, "even 1-sample micro-batches need 9 MB > 5 MB")


def _data() -> Tensors:
    x, y = batch(36)  # 4 full steps and a short one per epoch
    return Tensors(x, y)


def _train(net: nn.Module, plan: Plan | None, adapt: Adaptation | None) -> tuple[nn.Module, float]:
    net = copy.deepcopy(net)
    loss = train_local(net, _data(), PARAMS, seed=3, plan=plan, adapt=adapt)
    return net, loss


def _same_weights(a: nn.Module, b: nn.Module) -> bool:
    return all(
        torch.allclose(p, q, atol=1e-5) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


def test_budget_drop_switches_plan_and_keeps_the_work() -> None:
    torch.manual_seed(0)
    net = Trunked(norm=False)
    steps = len(step_sizes(36, 8, 2))
    log = PlanLog()
    adapt = Adaptation(lambda k: 100.0 if k < 3 else 10.0, _fake_planner, log)
    planned, loss = _train(net, None, adapt)
    assert log.runs == [(FULL, 3), (SMALL, steps - 3)]
    assert log.steps == steps and log.stopped == ""
    assert log.label(8) == "bs8>4x2+ckpt3"
    # Exact plans without BatchNorm: the same training as if nothing had happened.
    plain, plain_loss = _train(net, None, None)
    assert loss == pytest.approx(plain_loss, rel=1e-5)
    assert _same_weights(planned, plain)


def test_budget_recovering_switches_back() -> None:
    net = Trunked(norm=True)
    log = PlanLog()
    budgets = [100.0] * 2 + [10.0] * 3 + [100.0] * 5
    trained, _ = _train(net, None, Adaptation(lambda k: budgets[k], _fake_planner, log))
    assert log.runs == [(FULL, 2), (SMALL, 3), (FULL, 5)]
    assert type(trained.features) is nn.Sequential  # checkpointing undone between plans


def test_between_steps_the_model_is_plain() -> None:
    """The budget check (and any workload measurement in it) never sees checkpoint wrappers."""
    net = copy.deepcopy(Trunked(norm=True))
    seen: list[type] = []

    def budget(step: int) -> float:
        seen.append(type(net.features))
        return 10.0  # SMALL: checkpointed

    log = PlanLog()
    train_local(
        net, _data(), PARAMS, seed=3, plan=SMALL, adapt=Adaptation(budget, _fake_planner, log)
    )
    assert log.runs == [(SMALL, 10)] and set(seen) == {nn.Sequential}


def test_no_plan_fits_stops_with_the_reason() -> None:
    net = Trunked(norm=False)
    log = PlanLog()
    trained, loss = _train(
        net, None, Adaptation(lambda k: 100.0 if k < 4 else 5.0, _fake_planner, log)
    )
    assert log.steps == 4 and math.isfinite(loss)
    assert log.stopped.startswith("memory budget fell to 5 MB before step 5: even 1-sample")
    assert not _same_weights(trained, net)  # the four steps did run


def test_with_the_real_planner() -> None:
    torch.manual_seed(1)
    net = Trunked(norm=True, width=16)
    full = choose_plan(net, (3, 8, 8), 8, 1e6, model_name="trunked8")
    tight = full.predicted_peak_mb * 0.6
    choose = memoised(lambda b: choose_plan(net, (3, 8, 8), 8, b, model_name="trunked8"))
    log = PlanLog()
    _train(net, None, Adaptation(lambda k: 1e6 if k < 2 else tight, choose, log))
    assert [p for p, _ in log.runs][0] == FULL and len(log.runs) == 2
    assert choose(tight).feasible and choose(tight).predicted_peak_mb <= tight
    assert log.runs[1][0] == choose(tight).plan
