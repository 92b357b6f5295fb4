"""Many devices' local training at once: one model, its parameters stacked per device.

For small models a worker spends more time dispatching operators than
computing them. `train_batched` trains n devices' copies in one pass per
step - `torch.func.vmap` over `functional_call` with the parameters and
buffers (BatchNorm's running statistics included) stacked along a device
dimension - and gives each device what `train_local` would have: the same
data order (each device's own seeded generator), the same SGD with momentum
and weight decay, the client halves' gradient corrections (FedProx's proximal
term), the same mean loss. Results equal sequential training within
floating-point tolerance (a test checks 1e-5).

It applies where sequential training is a plain loop over full batches:
plain SGD (LocalOptimizer.plain_sgd), elementwise (`batchable`) client
halves, no memory plan (micro-batches, checkpoints), the same number of
examples on every device, no dropout (vmap would draw different random
numbers).
`batching_pays` measures, once per shape in a worker, whether it is faster
than one device after another; fedbench's handler uses it only then, and
the records say so (the plan column ends in "vmap<n>"). One vmapped step
holds at most MAX_VMAP_EXAMPLES examples (devices x batch): a call for 50
devices is trained in blocks, and a worker's memory does not grow with it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from fedbench.data.source import Tensors
from fedbench.train.loop import TrainParams, train_local

State = dict[str, torch.Tensor]
# The most examples one vmapped step holds (devices x batch): 8 devices at batch 16.
# Measured on the small CNN, 48 devices at batch 16 (loaded 2-core host): in one step
# 1.18 GB peak, 6.7 s; in blocks of 16: 0.78 GB, 8.3 s; of 8: 0.54 GB, 8.3 s; one by
# one: 0.37 GB, 10.8 s.
MAX_VMAP_EXAMPLES = 128


def batchable(model: nn.Module, datas: Sequence[Tensors], params: TrainParams) -> bool:
    """Whether vmapped training reproduces `train_local` for these devices."""
    return (
        len(datas) > 1
        and params.optimizer.plain_sgd()
        and all(h.batchable for h in params.corrections())
        and len({len(d) for d in datas}) == 1
        and len(datas[0]) > 0
        and not any(isinstance(m, nn.modules.dropout._DropoutNd) for m in model.modules())
    )


def train_batched(
    model: nn.Module, datas: Sequence[Tensors], params: TrainParams, seeds: Sequence[int]
) -> list[tuple[State, float]]:
    """Each device's trained state and mean loss, as `train_local(copy, data, params, seed)`.

    A vmapped step holds every device's activations at once: n devices at
    batch b are one batch of n x b examples (50 small-CNN devices at batch 16:
    ~0.9 GB). Devices are trained MAX_VMAP_EXAMPLES // b at a time, so a
    worker's memory is that of one batch of at most that many examples,
    however many devices its call carries.
    """
    seeds = list(seeds)
    batch = max(1, min(params.batch_size, len(datas[0]))) if datas else 1
    block = max(1, MAX_VMAP_EXAMPLES // batch)
    out: list[tuple[State, float]] = []
    for lo in range(0, len(datas), block):
        out += _train_block(model, datas[lo : lo + block], params, seeds[lo : lo + block])
    return out


def _train_block(
    model: nn.Module, datas: Sequence[Tensors], params: TrainParams, seeds: Sequence[int]
) -> list[tuple[State, float]]:
    n = len(datas)
    model.train()
    start = {k: v.detach() for k, v in model.named_parameters()}
    weights = {k: v.unsqueeze(0).repeat(n, *([1] * v.dim())) for k, v in start.items()}
    buffers = {
        k: v.detach().unsqueeze(0).repeat(n, *([1] * v.dim())) for k, v in model.named_buffers()
    }
    momentum: dict[str, torch.Tensor] = {}
    generators = [torch.Generator().manual_seed(s) for s in seeds]

    def loss_of(w: State, b: State, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(model, (w, b), (x,)), y)

    step = vmap(grad_and_value(loss_of))
    size = len(datas[0])
    totals = torch.zeros(n, dtype=torch.float64)
    steps = 0
    for _ in range(params.local_epochs):
        orders = [torch.randperm(size, generator=g) for g in generators]
        for at in range(0, size, params.batch_size):
            picks = [order[at : at + params.batch_size] for order in orders]
            x = torch.stack([d.x[i] for d, i in zip(datas, picks, strict=True)])
            y = torch.stack([d.y[i] for d, i in zip(datas, picks, strict=True)])
            grads, losses = step(weights, buffers, x, y)
            totals += losses.detach().double()
            steps += 1
            _sgd(weights, grads, momentum, start, params)
    return [
        (
            {**{k: w[i] for k, w in weights.items()}, **{k: b[i] for k, b in buffers.items()}},
            float(totals[i] / steps),
        )
        for i in range(n)
    ]


@torch.no_grad()
def _sgd(weights: State, grads: State, momentum: State, anchor: State, params: TrainParams) -> None:
    """torch.optim.SGD's update (no dampening, no Nesterov), the halves' corrections first.

    In place on the gradient, with no temporaries: n devices' stacked weights
    often do not fit the cache, so each extra pass over them is a pass over
    main memory.
    """
    for k, w in weights.items():
        g = grads[k]
        for half in params.corrections():
            half.correct(g, w, anchor[k])
        if params.weight_decay:
            g.add_(w, alpha=params.weight_decay)
        if params.momentum:
            if k in momentum:
                g = momentum[k].mul_(params.momentum).add_(g)
            else:
                g = momentum.setdefault(k, g.clone())
        w.add_(g, alpha=-params.lr)


def batching_pays(model: nn.Module, datas: Sequence[Tensors], params: TrainParams) -> bool:
    """Whether one vmapped step over the devices beats one step per device, here."""
    key = (
        type(model).__name__,
        sum(p.numel() for p in model.parameters()),
        len(datas),
        min(params.batch_size, len(datas[0])),
        tuple(datas[0].x.shape[1:]),
    )
    if key not in _DECISIONS:
        _DECISIONS[key] = _measured(model, datas, params)
    return _DECISIONS[key]


_DECISIONS: dict[tuple[object, ...], bool] = {}  # per worker process: measured once per shape


def _measured(model: nn.Module, datas: Sequence[Tensors], params: TrainParams) -> bool:
    """One vmapped step against one step of each device in turn, best of up to three tries.

    A single timing on a busy host decides either way by chance; the best of
    interleaved tries is what the host can do, and a clear answer (a third
    faster or slower) stops early, so a large model is not timed three times.
    """
    probe = TrainParams(
        batch_size=params.batch_size,
        local_epochs=1,
        lr=params.lr,
        momentum=params.momentum,
        weight_decay=params.weight_decay,
    )
    one = [Tensors(d.x[: params.batch_size], d.y[: params.batch_size]) for d in datas]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    together, alone = math.inf, math.inf
    try:
        train_batched(model, one, probe, range(len(one)))  # warm-up: vmap's first call compiles
        train_local(model, one[0], probe, seed=0)
        for _ in range(_TRIES):
            started = time.perf_counter()
            train_batched(model, one, probe, range(len(one)))
            together = min(together, time.perf_counter() - started)
            model.load_state_dict(state)
            started = time.perf_counter()
            # Every device in turn, as the sequential path trains them: one device
            # timed and scaled by n would charge the cold cache the vmapped step
            # left behind n times, and batching would win ties it loses.
            for i, data in enumerate(one):
                model.load_state_dict(state)
                train_local(model, data, probe, seed=i)
            alone = min(alone, time.perf_counter() - started)
            model.load_state_dict(state)
            if not _CLEAR < together / alone < 1 / _CLEAR:
                break
    finally:
        model.load_state_dict(state)
    return together < _MARGIN * alone


_TRIES = 3
_CLEAR = 2 / 3  # a ratio outside [2/3, 3/2] needs no second try
_MARGIN = 0.9  # batching must win by 10%: a tie is not worth a different code path
