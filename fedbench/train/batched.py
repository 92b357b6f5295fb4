"""Many devices' local training at once: one model, its parameters stacked per device.

For small models a worker spends more time dispatching operators than
computing them, on a CPU and far more on a GPU, where one small device's
step leaves the accelerator idle. `train_batched` trains n devices' copies
in one pass per step - `torch.func.vmap` over `functional_call` with the
parameters and buffers stacked along a device dimension - and gives each
device what `train_local` would have:

- the same data order (each device's own seeded generator) and mean loss;
- its own BatchNorm running statistics (the buffers are stacked too);
- the same optimizer: torch.optim.SGD with momentum and weight decay, or
  Adam/AdamW, with no settings of their own (`stacked_optimizer`: the update
  of torch.optim written over the stacked parameters, state per device),
  the client halves' gradient corrections first (FedProx's proximal pull;
  only `batchable`, elementwise, halves);
- dropout with per-device randomness (vmap's randomness="different").

Results equal sequential training within floating-point tolerance (tests
check 1e-5), except for dropout: vmap draws one mask per device from the
global generator, which `train_cohort` seeds from the seeds of the devices
trained together. A batched run is reproducible for the same cohort, chunk
and host device; a device's masks differ from those it would draw alone.

On a GPU a worker's devices may not fit at once: `train_cohort` trains them
in chunks (`chunk_for`: what the GPU has free over what one device's step
needs), and a CUDA out-of-memory error halves the chunk and retries it
instead of failing the round; a device that does not fit even alone is
left to train by itself. `batching_pays` measures, once per shape in a
worker, whether a batched step is faster than one device after another;
fedbench's handler batches only then, and the records say so (the plan
column ends in "vmap<n>").

Whatever the chunk, one vmapped step holds at most MAX_VMAP_EXAMPLES
examples (devices x batch): `train_batched` trains a call's devices in
blocks of that many, so a worker's memory does not grow with its cohort;
the smaller of the GPU chunk and the block wins.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call, vmap

from fedbench.algorithms.base import ClientHalf
from fedbench.core.workload import Workload
from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.train.accelerator import free_bytes, is_cuda_oom, release
from fedbench.train.loop import TrainParams, train_local

State = dict[str, torch.Tensor]
Trained = tuple[State, float]  # a device's trained state (parameters and buffers), mean loss
# The most examples one vmapped step holds (devices x batch): 8 devices at batch 16.
# Measured on the small CNN, 48 devices at batch 16 (loaded 2-core host): in one step
# 1.18 GB peak, 6.7 s; in blocks of 16: 0.78 GB, 8.3 s; of 8: 0.54 GB, 8.3 s; one by
# one: 0.37 GB, 10.8 s.
MAX_VMAP_EXAMPLES = 128


class StackedOptimizer(ABC):
    """An optimizer's update over parameters stacked along a leading device dimension."""

    @abstractmethod
    def step(self, weights: State, grads: State) -> None:
        """Update `weights` in place from `grads` (which it may overwrite)."""


class StackedSGD(StackedOptimizer):
    """torch.optim.SGD's update (no dampening, no Nesterov), the halves' corrections first.

    In place on the gradient, with no temporaries: n devices' stacked weights
    often do not fit the cache, so each extra pass over them is a pass over
    main memory.
    """

    def __init__(self, params: TrainParams, anchor: State) -> None:
        self.params = params
        self.anchor = anchor
        self.momentum: State = {}

    @torch.no_grad()
    def step(self, weights: State, grads: State) -> None:
        p = self.params
        for k, w in weights.items():
            g = _corrected(grads[k], w, self.anchor[k], p)
            if p.weight_decay:
                g.add_(w, alpha=p.weight_decay)
            if p.momentum:
                if k in self.momentum:
                    g = self.momentum[k].mul_(p.momentum).add_(g)
                else:
                    g = self.momentum.setdefault(k, g.clone())
            w.add_(g, alpha=-p.lr)


class StackedAdam(StackedOptimizer):
    """torch.optim.Adam's update (betas 0.9/0.999, eps 1e-8, no amsgrad); AdamW's with
    `decoupled`. Every device steps together, so one step count serves them all."""

    BETAS = (0.9, 0.999)
    EPS = 1e-8

    def __init__(self, params: TrainParams, anchor: State, decoupled: bool) -> None:
        self.params = params
        self.anchor = anchor
        self.decoupled = decoupled
        self.exp_avg: State = {}
        self.exp_avg_sq: State = {}
        self.steps = 0

    @torch.no_grad()
    def step(self, weights: State, grads: State) -> None:
        p, (beta1, beta2) = self.params, self.BETAS
        self.steps += 1
        step_size = p.lr / (1 - beta1**self.steps)
        correction2 = (1 - beta2**self.steps) ** 0.5
        for k, w in weights.items():
            g = _corrected(grads[k], w, self.anchor[k], p)
            if p.weight_decay and self.decoupled:
                w.mul_(1 - p.lr * p.weight_decay)
            elif p.weight_decay:
                g.add_(w, alpha=p.weight_decay)
            m = self.exp_avg.setdefault(k, torch.zeros_like(w))
            v = self.exp_avg_sq.setdefault(k, torch.zeros_like(w))
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            w.addcdiv_(m, (v.sqrt() / correction2).add_(self.EPS), value=-step_size)


def _corrected(
    g: torch.Tensor, w: torch.Tensor, anchor: torch.Tensor, params: TrainParams
) -> torch.Tensor:
    """`g` corrected in place by each client half (FedProx: mu (w - w_global)), as
    `train_local`'s step pre-hook does before the optimizer reads it."""
    for half in params.corrections():
        half.correct(g, w, anchor)
    return g


# The optimizer classes with a stacked update, each with no settings of its own
# (LocalOptimizer.settings: Nesterov, betas, amsgrad... are refused, not ignored).
_STACKED: dict[type[torch.optim.Optimizer], Callable[[TrainParams, State], StackedOptimizer]] = {
    torch.optim.SGD: StackedSGD,
    torch.optim.Adam: lambda params, anchor: StackedAdam(params, anchor, decoupled=False),
    torch.optim.AdamW: lambda params, anchor: StackedAdam(params, anchor, decoupled=True),
}


def stacked_optimizer(params: TrainParams, anchor: State) -> StackedOptimizer:
    """The stacked update of the local optimizer the train config names.

    The one place the batched path reads the optimizer: a local optimizer
    without a stacked update here is refused by `refusal` (its devices train
    one after another).
    """
    why = refusal(params)
    if why is not None:
        raise FedbenchError(f"train.optimizer={params.optimizer.target}: {why}")
    return _STACKED[params.optimizer.cls](params, anchor)


def refusal(params: TrainParams) -> str | None:
    """Why devices training with `params` cannot be batched; None if they can."""
    optimizer = params.optimizer
    if optimizer.cls not in _STACKED:
        batched = ", ".join(f"torch.optim.{c.__name__}" for c in _STACKED)
        return (
            f"optimizer {optimizer.target} has no stacked update in fedbench.train.batched "
            f"(batched: {batched})"
        )
    if optimizer.settings:
        return (
            f"optimizer {optimizer.target} has settings of its own "
            f"({', '.join(sorted(optimizer.settings))}): the stacked update is the default one"
        )
    held = [type(h).__qualname__ for h in params.corrections() if not h.batchable]
    if held:
        return f"client half {', '.join(held)} corrects gradients not elementwise"
    stepped = [type(h).__qualname__ for h in params.halves if _steps_its_own_way(h)]
    if stepped:
        return f"client half {', '.join(stepped)} draws per step or replaces the loss"
    return None


def _steps_its_own_way(half: ClientHalf) -> bool:
    """A half with its own `before_step` or `objective`: the stacked loop calls neither."""
    kind = type(half)
    own_step = kind.before_step is not ClientHalf.before_step
    return own_step or kind.objective is not ClientHalf.objective


def batchable(model: nn.Module, datas: Sequence[Tensors], params: TrainParams) -> bool:
    """Whether vmapped training reproduces `train_local` for these devices."""
    return (
        len(datas) > 1
        and refusal(params) is None
        and len({len(d) for d in datas}) == 1
        and len(datas[0]) > 0
    )


def _random(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.dropout._DropoutNd) for m in model.modules())


def train_batched(
    model: nn.Module, datas: Sequence[Tensors], params: TrainParams, seeds: Sequence[int]
) -> list[Trained]:
    """Each device's trained state and mean loss, as `train_local(copy, data, params, seed)`.

    The devices' data must be on the model's device; the model itself is
    not changed. A vmapped step holds every device's activations at once: n
    devices at batch b are one batch of n x b examples (50 small-CNN devices
    at batch 16: ~0.9 GB). Devices are trained MAX_VMAP_EXAMPLES // b at a
    time, so a worker's memory is that of one batch of at most that many
    examples, however many devices its call (or its GPU chunk) carries.
    """
    seeds = list(seeds)
    batch = max(1, min(params.batch_size, len(datas[0]))) if datas else 1
    block = max(1, MAX_VMAP_EXAMPLES // batch)
    out: list[Trained] = []
    for lo in range(0, len(datas), block):
        out += _train_block(model, datas[lo : lo + block], params, seeds[lo : lo + block])
    return out


def _train_block(
    model: nn.Module, datas: Sequence[Tensors], params: TrainParams, seeds: Sequence[int]
) -> list[Trained]:
    n = len(datas)
    model.train()
    start = {k: v.detach() for k, v in model.named_parameters()}
    weights = {k: v.unsqueeze(0).repeat(n, *([1] * v.dim())) for k, v in start.items()}
    buffers = {
        k: v.detach().unsqueeze(0).repeat(n, *([1] * v.dim())) for k, v in model.named_buffers()
    }
    optimizer = stacked_optimizer(params, start)
    generators = [torch.Generator().manual_seed(s) for s in seeds]

    def loss_of(w: State, b: State, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(model, (w, b), (x,)), y)

    randomness = "different" if _random(model) else "error"
    losses_of = vmap(loss_of, randomness=randomness)

    def step(w: State, b: State, x: torch.Tensor, y: torch.Tensor) -> tuple[State, torch.Tensor]:
        # One vmapped forward, then plain autograd on the sum of the devices' losses:
        # each device's loss depends on its own slice only, so the sum's gradient is
        # every device's gradient, stacked. torch.func.grad would give the same, but it
        # imports torch._dynamo and sympy (~70 MB in every Ray worker) on its first call.
        with torch.enable_grad():  # as torch.func.grad: whatever the caller's grad mode
            leaves = {k: v.detach().requires_grad_() for k, v in w.items()}
            losses = losses_of(leaves, b, x, y)
            found = torch.autograd.grad(losses.sum(), list(leaves.values()), allow_unused=True)
        grads = {
            k: torch.zeros_like(v) if g is None else g
            for (k, v), g in zip(leaves.items(), found, strict=True)
        }
        return grads, losses.detach()

    size = len(datas[0])
    xs = torch.stack([d.x for d in datas])  # (devices, examples, ...): one gather per step
    ys = torch.stack([d.y for d in datas])
    rows = torch.arange(n, device=xs.device).unsqueeze(1)
    totals = torch.zeros(n, dtype=torch.float64, device=xs.device)
    steps = 0
    for _ in range(params.local_epochs):
        orders = torch.stack([torch.randperm(size, generator=g) for g in generators])
        orders = orders.to(xs.device)
        for at in range(0, size, params.batch_size):
            picks = orders[:, at : at + params.batch_size]
            grads, losses = step(weights, buffers, xs[rows, picks], ys[rows, picks])
            totals += losses.detach().double()
            steps += 1
            optimizer.step(weights, grads)
    means = (totals / steps).tolist()
    return [
        (
            {**{k: w[i] for k, w in weights.items()}, **{k: b[i] for k, b in buffers.items()}},
            means[i],
        )
        for i in range(n)
    ]


def device_bytes(workload: Workload) -> int:
    """What one device adds to a batched step: its weights, gradients, optimizer state,
    saved activations, workspace and batch (the workload's memory terms)."""
    return (
        workload.param_bytes
        + workload.grad_bytes
        + workload.optimizer_state_bytes
        + workload.saved_activation_bytes
        + workload.workspace_bytes
        + workload.input_bytes
    )


HEADROOM = 0.6  # of the free GPU memory a chunk plans to use: vmap's temporaries, fragmentation


def chunk_for(device: torch.device, per_device: int, devices: int) -> int:
    """How many devices to train together on `device`: all of them on the CPU; on a GPU
    as many as its free memory holds at `per_device` bytes each (an estimate: an
    out-of-memory error halves it, `train_cohort`)."""
    free = free_bytes(device)
    if free is None or per_device <= 0:
        return devices
    return max(1, min(devices, int(free * HEADROOM) // per_device))


Step = Callable[[nn.Module, Sequence[Tensors], TrainParams, Sequence[int]], list[Trained]]


def train_cohort(
    model: nn.Module,
    datas: Sequence[Tensors],
    params: TrainParams,
    seeds: Sequence[int],
    chunk: int,
    train: Step = train_batched,
) -> tuple[list[Trained | None], int]:
    """Every device trained in chunks of at most `chunk`; (results, the chunk that fitted).

    A CUDA out-of-memory error halves the chunk and retries the devices it
    was training (the model is untouched by a failed chunk). A device that
    does not fit even alone gets None: it trains by itself. The global
    generator is seeded from each chunk's device seeds, so a chunk's
    dropout masks are reproducible.
    """
    device = next(model.parameters()).device
    results: list[Trained | None] = []
    at = 0
    while at < len(datas):
        size = min(chunk, len(datas) - at)
        torch.manual_seed(_mixed(seeds[at : at + size]))
        try:
            results += train(model, datas[at : at + size], params, seeds[at : at + size])
        except Exception as exc:
            if not is_cuda_oom(exc):
                raise
            release(device)
            if size == 1:
                results.append(None)
                at += 1
            else:
                chunk = size // 2
            continue
        at += size
    return results, chunk


def _mixed(seeds: Sequence[int]) -> int:
    mixed = 0
    for s in seeds:
        mixed = (mixed * 1_000_003 + int(s)) % (2**63)
    return mixed


def batching_pays(model: nn.Module, datas: Sequence[Tensors], params: TrainParams) -> bool:
    """Whether one vmapped step over the devices beats one step per device, here."""
    key = (
        type(model).__name__,
        sum(p.numel() for p in model.parameters()),
        len(datas),
        min(params.batch_size, len(datas[0])),
        tuple(datas[0].x.shape[1:]),
        str(datas[0].x.device),
        params.optimizer.target,
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
    Both sides end by reading their losses, which waits for a GPU's queue.
    """
    probe = TrainParams(
        batch_size=params.batch_size,
        local_epochs=1,
        lr=params.lr,
        momentum=params.momentum,
        weight_decay=params.weight_decay,
        optimizer=params.optimizer,
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
    except Exception as exc:
        if not is_cuda_oom(exc):
            raise
        release(next(model.parameters()).device)
        return False  # the cohort does not fit the GPU at once: one device after another
    finally:
        model.load_state_dict(state)
    return together < _MARGIN * alone


_TRIES = 3
_CLEAR = 2 / 3  # a ratio outside [2/3, 3/2] needs no second try
_MARGIN = 0.9  # batching must win by 10%: a tie is not worth a different code path
