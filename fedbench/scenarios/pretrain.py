"""Server-side pretraining of the global model, cached on disk.

The cache key covers everything that determines the weights - data config,
model config, pretraining parameters, seed, the thread count it trains with
and the numerical environment (torch build, ISA level: fedbench.core.numerics)
- so a re-run (or every run of a multirun sweep over strategies) skips it,
and a host that would compute other weights computes its own.

The recipe is built to land in the same place on any host (issue 31): a
floating-point sum's order differs with threads, ISA and torch build, and a
pretraining that ends at a high learning rate turns those last bits into
tens of points of day-0 accuracy. A linear warm-up then a cosine decay to
zero ends where the loss is flat, and a last pass re-estimates BatchNorm's
running statistics for the final weights (`bn_recalibrate`), so evaluation
normalises with the statistics of the model it scores.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from fedbench.core.numerics import environment, fixed_threads
from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment
from fedbench.experiment.typed import Bounds, dump
from fedbench.paths import cache_dir
from fedbench.report.progress import console
from fedbench.scenarios.context import DataContext
from fedbench.train.loop import TrainParams, step_sizes, train_local

SCHEDULES = ("cosine", "constant")
# scenario.pretrain's numbers: (type, range). The ranges are train.*'s (TrainConfig), with
# epochs >= 0 (0: no pretraining); warmup_fraction is checked with the schedule.
_RANGES: dict[str, tuple[bool, Bounds]] = {  # key -> (an integer?, its range)
    "epochs": (True, Bounds(ge=0, le=100_000)),
    "batch_size": (True, Bounds(ge=1, le=1 << 20)),
    "lr": (False, Bounds(gt=0.0, le=1e3)),
    "momentum": (False, Bounds(ge=0.0, lt=1.0)),
    "weight_decay": (False, Bounds(ge=0.0, le=1.0)),
}


@dataclass(frozen=True)
class PretrainParams:
    epochs: int = 5
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    # cosine: a linear warm-up over the first `warmup_fraction` of the steps, then a
    # cosine decay to 0 at the last step; constant: `lr` throughout (before issue 31).
    schedule: str = "cosine"
    warmup_fraction: float = 0.1
    # A last pass over the server split re-estimates BatchNorm's running statistics
    # for the final weights (train-mode forwards, no gradient, equal-weight average).
    bn_recalibrate: bool = True

    @classmethod
    def from_config(cls, cfg: PretrainParams | Mapping[str, Any] | None) -> PretrainParams:
        if cfg is None:
            return cls()
        if isinstance(cfg, PretrainParams):
            return cfg
        valid = set(cls.__dataclass_fields__)
        unknown = set(cfg) - valid
        if unknown:
            raise FedbenchError(
                f"scenario.pretrain has unknown key(s) {sorted(unknown)}; valid: {sorted(valid)}"
            )
        params = cls(**dict(cfg))
        params.check_numbers()
        if params.schedule not in SCHEDULES:
            raise FedbenchError(
                f"scenario.pretrain.schedule={params.schedule!r}: valid: {', '.join(SCHEDULES)}"
            )
        warmup = params.warmup_fraction
        if isinstance(warmup, bool) or not isinstance(warmup, (int, float)) or not 0 <= warmup < 1:
            raise FedbenchError(
                f"scenario.pretrain.warmup_fraction={warmup!r}: must be a number in [0, 1)"
            )
        return params

    def check_numbers(self) -> None:
        """Every number in its range, as train.* is checked (fedbench.experiment.schema).

        The pretraining runs inside the run, after the folder exists and the
        data is loaded: a NaN learning rate found there is a traceback (or NaN
        weights) minutes in, so it is refused with the scenario instead.
        """
        for key, (integer, bounds) in _RANGES.items():
            value = getattr(self, key)
            typed = isinstance(value, int if integer else (int, float))
            number = typed and not isinstance(value, bool) and math.isfinite(value)
            if not number or bounds.violated(value):
                what = "an integer" if integer else "a finite number"
                raise FedbenchError(
                    f"scenario.pretrain.{key}={value!r}: must be {what} {bounds.describe()}"
                )

    def lr_scale(self, num_examples: int) -> Callable[[int], float] | None:
        """The learning rate's factor at each optimizer step (None: constant)."""
        if self.schedule == "constant":
            return None
        total = len(step_sizes(num_examples, self.batch_size, self.epochs))
        return warmup_cosine(total, round(self.warmup_fraction * total))


def warmup_cosine(total: int, warmup: int) -> Callable[[int], float]:
    """Step i's factor: (i+1)/warmup while warming up, then cosine from 1 to 0 at `total`."""

    def scale(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(total - warmup, 1)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return scale


def pretrain(
    model: nn.Module,
    data: Tensors,
    params: PretrainParams,
    seed: int,
    on_epoch: Callable[[int, float], None] | None = None,
) -> float:
    """Train `model` in place as the server pretrains it; the mean training loss."""
    train = TrainParams(
        params.batch_size, params.epochs, params.lr, params.momentum, params.weight_decay
    )
    scale = params.lr_scale(len(data))
    loss = train_local(model, data, train, seed=seed, on_epoch=on_epoch, lr_scale=scale)
    if params.bn_recalibrate:
        recalibrate_batchnorm(model, data, params.batch_size)
    return loss


def recalibrate_batchnorm(model: nn.Module, data: Tensors, batch_size: int) -> None:
    """BatchNorm's running statistics re-estimated for the current weights.

    The statistics training leaves are a moving average over the last steps'
    weights; they lag the final weights. torch's `update_bn` (one pass in
    training mode, an equal-weight average over the batches, no gradient)
    measures them on the final weights instead.
    """
    batches = (data.x[i : i + batch_size] for i in range(0, len(data), batch_size))
    torch.optim.swa_utils.update_bn(batches, model)


def pretrained_state(
    experiment: Experiment,
    params: PretrainParams,
    ctx: DataContext,
    build: Callable[[], nn.Module],
    threads: int = 1,
) -> tuple[dict[str, torch.Tensor], bool]:
    """The pretrained global weights, and whether they came from the cache.

    Built and trained with `threads` intra-op threads whatever the host has
    (the server's `runtime.server_threads`), so the weights do not depend
    on the host's core count.
    """
    with fixed_threads(threads):
        torch.manual_seed(experiment.seed)
        model = build()
        key_src = json.dumps(
            {
                "data": dump(experiment.data),
                "model": dump(experiment.model),
                # The code behind a _target_ can change under the same config.
                "structure": repr(model),
                "shapes": {k: list(v.shape) for k, v in model.state_dict().items()},
                "pretrain": asdict(params),
                "seed": experiment.seed,
                "threads": threads,
                # torch version and build, ISA level: each sums in its own order.
                "numerics": environment(),
            },
            sort_keys=True,
        )
        key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
        path = cache_dir() / "pretrained" / f"{experiment.model.name}-{key}.pt"
        if path.exists():
            return torch.load(path, map_location="cpu", weights_only=True), True
        if params.epochs > 0 and len(ctx.splits.server) > 0:
            title = f"pretraining {experiment.model.name} on {len(ctx.splits.server)} examples"
            with console.task(title, total=params.epochs, unit="epochs") as task:

                def epoch_done(epoch: int, loss: float) -> None:
                    task.update(f"epoch {epoch}, training loss {loss:.3f}")
                    task.advance()

                pretrain(model, ctx.splits.server, params, experiment.seed, epoch_done)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a crash never leaves a half-written cache entry
    return state, False
