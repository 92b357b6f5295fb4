"""Local training and evaluation: plain PyTorch, the same on every device.

A memory plan (fedbench.train.plans) may split each step into micro-batches
and checkpoint the model's trunk; with an `Adaptation` the loop re-plans
between optimizer steps when the device's memory budget changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from fedbench.algorithms.base import ClientHalf, Objective
from fedbench.core import interrupt
from fedbench.core.plans import FULL, Plan
from fedbench.data.source import Tensors
from fedbench.train.adaptive import Adaptation
from fedbench.train.execute import PlanRunner
from fedbench.train.optimizers import SGD, LocalOptimizer


@dataclass(frozen=True)
class TrainParams:
    """Local training parameters: the train config's hyperparameters, the optimizer, the halves.

    The first five travel in the train config the server sends each round
    (fedbench.train.hyper); `optimizer` and `bn_momentum_scaled` are the
    experiment's (fedbench/conf/train); `halves` are the client halves of the keys the
    Flower strategy sent (fedbench.algorithms: FedProx's proximal term).
    """

    batch_size: int
    local_epochs: int
    lr: float
    momentum: float
    weight_decay: float
    # BatchNorm under micro-batching: scale the momentum so m per-micro-batch
    # updates of the running statistics decay as one full-batch update
    # (fedbench.train.execute).
    bn_momentum_scaled: bool = False
    optimizer: LocalOptimizer = SGD
    halves: tuple[ClientHalf, ...] = ()

    def corrections(self) -> tuple[ClientHalf, ...]:
        """The halves that change the gradients."""
        return tuple(h for h in self.halves if h.corrects())

    def objective(self, model: nn.Module) -> Objective | None:
        """The one half's micro-batch loss that replaces cross-entropy (None: cross-entropy)."""
        found = [(h, o) for h in self.halves if (o := h.objective(model)) is not None]
        if len(found) > 1:
            names = ", ".join(type(h).__qualname__ for h, _ in found)
            raise ValueError(f"client halves {names} each replace the loss: at most one may")
        return found[0][1] if found else None


def make_optimizer(params: TrainParams, model: nn.Module) -> torch.optim.Optimizer:
    return params.optimizer.build(
        model.parameters(), lr=params.lr, momentum=params.momentum, weight_decay=params.weight_decay
    )


def add_corrections(
    optimizer: torch.optim.Optimizer, model: nn.Module, halves: tuple[ClientHalf, ...]
) -> None:
    """Before every update, let each half correct each gradient (FedProx: mu (w - w_global)).

    The anchors are the weights training starts from (the global model), so a
    correction is exact however the step was split into micro-batches.
    """
    anchors = [(p, p.detach().clone()) for p in model.parameters() if p.requires_grad]

    def correct(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        with torch.no_grad():
            for p, anchor in anchors:
                if p.grad is not None:
                    for half in halves:
                        half.correct(p.grad, p, anchor)

    optimizer.register_step_pre_hook(correct)


def step_sizes(num_examples: int, batch_size: int, epochs: int) -> tuple[int, ...]:
    """The batch size of every optimizer step: full batches, then the remainder."""
    full, rest = divmod(num_examples, batch_size)
    one_epoch = (batch_size,) * full + ((rest,) if rest else ())
    return one_epoch * epochs


def train_local(
    model: nn.Module,
    data: Tensors,
    params: TrainParams,
    seed: int,
    plan: Plan | None = None,
    adapt: Adaptation | None = None,
    on_epoch: Callable[[int, float], None] | None = None,
    lr_scale: Callable[[int], float] | None = None,
) -> float:
    """Train in place; return the mean training loss over all steps.

    `on_epoch(epoch, mean_loss_so_far)` is called after each epoch (progress).
    With `lr_scale`, optimizer step i (from 0) runs at `params.lr * lr_scale(i)`
    (a schedule: the server's pretraining warms up and decays to zero).

    Before each optimizer step every client half's `before_step` runs (FjORD
    draws the step's width there), and one half may replace the loss
    (`objective`): both hold for every micro-batch of the step.

    Every step runs under `plan` (default: the full batch). With `adapt`,
    the budget is checked before each optimizer step and the plan switched
    for the remaining steps (done steps and the optimizer state are kept);
    if no plan fits any more, training stops there (`adapt.log.stopped`).
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = make_optimizer(params, model)
    if params.corrections():
        add_corrections(optimizer, model, params.corrections())
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    current = plan or FULL
    total, steps = 0.0, 0
    runner = PlanRunner(
        model, optimizer, loss_fn, params.bn_momentum_scaled, params.objective(model)
    )
    for epoch in range(params.local_epochs):
        # The server's pretraining runs here for minutes before round 1: a Ctrl-C or SIGTERM
        # ends it at the next epoch (fedbench.core.interrupt; never set in a worker).
        interrupt.check()
        order = torch.randperm(len(data), generator=generator)
        for start in range(0, len(data), params.batch_size):
            idx = order[start : start + params.batch_size]
            if adapt is not None:
                chosen = adapt.plan_for(steps, current)
                if chosen is None:
                    return total / steps if steps else math.nan
                current = chosen
            if lr_scale is not None:
                for group in optimizer.param_groups:
                    group["lr"] = params.lr * lr_scale(steps)
            for half in params.halves:  # one draw per optimizer step (FjORD's width)
                half.before_step(steps, seed)
            total += runner.step(data.x[idx], data.y[idx], current, params.batch_size)
            if adapt is not None:
                adapt.log.record(current)
            steps += 1
        if on_epoch is not None:
            on_epoch(epoch + 1, total / steps if steps else math.nan)
    return total / steps if steps else math.nan


@torch.no_grad()
def evaluate(model: nn.Module, data: Tensors, batch_size: int = 256) -> tuple[float, float]:
    """(mean loss, accuracy) of `model` on `data`."""
    model.eval()
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    loss, correct = 0.0, 0
    for start in range(0, len(data), batch_size):
        x, y = data.x[start : start + batch_size], data.y[start : start + batch_size]
        logits = model(x)
        loss += float(loss_fn(logits, y))
        correct += int((logits.argmax(1) == y).sum())
    n = max(len(data), 1)
    return loss / n, correct / n
