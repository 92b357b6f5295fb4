"""Server-side pretraining of the global model, cached on disk.

The cache key covers everything that determines the weights - data config,
model config, pretraining parameters, seed and torch version - so a re-run
(or every run of a multirun sweep over strategies) skips it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from fedbench.errors import FedbenchError
from fedbench.experiment.schema import Experiment
from fedbench.experiment.typed import dump
from fedbench.paths import cache_dir
from fedbench.report.progress import console
from fedbench.scenarios.context import DataContext
from fedbench.train.loop import TrainParams, train_local


@dataclass(frozen=True)
class PretrainParams:
    epochs: int = 5
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4

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
        if params.epochs < 0 or params.batch_size < 1:
            raise FedbenchError(
                "scenario.pretrain.epochs must be >= 0 and batch_size >= 1, "
                f"got {params.epochs} and {params.batch_size}"
            )
        return params


def pretrained_state(
    experiment: Experiment,
    params: PretrainParams,
    ctx: DataContext,
    build: Callable[[], nn.Module],
) -> tuple[dict[str, torch.Tensor], bool]:
    """The pretrained global weights, and whether they came from the cache."""
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
            "torch": torch.__version__,
        },
        sort_keys=True,
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    path = cache_dir() / "pretrained" / f"{experiment.model.name}-{key}.pt"
    if path.exists():
        return torch.load(path, map_location="cpu", weights_only=True), True
    if params.epochs > 0 and len(ctx.splits.server) > 0:
        train = TrainParams(
            params.batch_size, params.epochs, params.lr, params.momentum, params.weight_decay
        )
        title = f"pretraining {experiment.model.name} on {len(ctx.splits.server)} examples"
        with console.task(title, total=params.epochs, unit="epochs") as task:

            def epoch_done(epoch: int, loss: float) -> None:
                task.update(f"epoch {epoch}, training loss {loss:.3f}")
                task.advance()

            train_local(model, ctx.splits.server, train, seed=experiment.seed, on_epoch=epoch_done)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a crash never leaves a half-written cache entry
    return state, False
