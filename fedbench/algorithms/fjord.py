"""FjORD (Horváth et al., "FjORD: Fair and Accurate Federated Learning under
Heterogeneous Targets with Ordered Dropout", NeurIPS 2021).

Ordered dropout: a submodel at width p keeps the first ceil(p * C) channels of
every hidden layer, so the narrow prefix is trained by everyone and the wide
tail by the devices that can hold it. Each device gets its largest width
p_max (`rate_policy` from its predicted costs, fedbench.algorithms.submodels)
and the p_max submodel; for every local batch (optimizer step) it draws
p uniformly from `rates` up to p_max and trains the p-prefix of its
p_max model. With self-distillation (`distill`, on by default as in the
paper's FjORD w/ KD) the p_max model is the teacher in the same step:

    loss = CE(teacher(x), y) + (1 - alpha) CE(student_p(x), y)
           + alpha T^2 KL(softmax(teacher(x) / T) || softmax(student_p(x) / T))

with the teacher's logits detached in the KL term. `kd_alpha=1`,
`kd_temperature=1` (the defaults) are what the authors' released FjORD code
(Flower's fjord baseline) trains with: the teacher on the labels, the
student on the teacher's soft labels alone; the paper states the loss with
alpha and T. The draw is seeded by the round's training seed and the step
(a rerun draws the same widths), and holds for every micro-batch of the step
under a memory plan, so a plan of m micro-batches gives the full batch's
gradient (exact without BatchNorm).

The server sends each device `model-rate` = p_max (the client half
`model-rate` builds that submodel), `od-rates` (the widths it may draw,
p_max first) and `od-kd` ([alpha, T], only with `distill`); clients send the
trained p_max submodel, `num-examples` and `model-rate`.

How fedbench's version differs from the paper, and why:

- BatchNorm: one set of running statistics shared by every width, which the
  server re-estimates per width before scoring it (static BN on its own
  split, fedbench.server.submodels.SubmodelEvaluation); the paper's code keeps
  separate running statistics per width. fedbench's width rule builds one
  architecture per width and has no per-width BN layers.
- A device's cost is emulated as if every step trained its p_max submodel
  once: the student's narrower forward costs less, the teacher's forward and
  backward under `distill` cost a second p_max step that the meter does not
  count (the meter costs the model it trains, one pass a step).
- A memory plan's activation checkpointing applies to the teacher (p_max)
  forward; the student's forward runs the p-prefix functionally, not
  checkpointed (its activations are at most p/p_max of the teacher's width).
- p_max is fixed per device for the run from the emulator's predictions
  (the paper assigns devices to tiers by capability, as here).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedbench.algorithms.base import ClientHalf, Objective, client_half
from fedbench.algorithms.submodels import DEFAULT_RATES, SubmodelStrategy
from fedbench.errors import FedbenchError
from fedbench.models import width

RATES_KEY = "od-rates"  # the widths a device may draw, its p_max first
KD_KEY = "od-kd"  # [alpha, temperature]: self-distillation from the p_max teacher


class FjORD(SubmodelStrategy):
    """Ordered dropout: each device's p_max submodel, a width p <= p_max drawn per batch."""

    def __init__(
        self,
        rate_policy: str = "budget",
        rates: Sequence[float] = DEFAULT_RATES,
        rate: float = 1.0,
        distill: bool = True,
        kd_alpha: float = 1.0,
        kd_temperature: float = 1.0,
        fraction_train: float = 1.0,
        fraction_evaluate: float = 0.0,
        min_train_nodes: int = 1,
        min_evaluate_nodes: int = 0,
        min_available_nodes: int = 1,
    ) -> None:
        super().__init__(
            rate_policy,
            rates,
            rate,
            fraction_train,
            fraction_evaluate,
            min_train_nodes,
            min_evaluate_nodes,
            min_available_nodes,
        )
        if not 0 <= kd_alpha <= 1:
            raise FedbenchError(f"algorithm.kd_alpha={kd_alpha!r}: a number in [0, 1]")
        if not kd_temperature > 0:
            raise FedbenchError(f"algorithm.kd_temperature={kd_temperature!r}: a number > 0")
        self.distill = bool(distill)
        self.kd = [float(kd_alpha), float(kd_temperature)]

    def allowed(self, top: float) -> list[float]:
        """The widths a device of largest width `top` draws from, `top` first."""
        return [top] + [r for r in self.rates if r < top]

    def extra_config(self, rate: float) -> dict[str, Any]:
        extra: dict[str, Any] = {RATES_KEY: self.allowed(rate)}
        if self.distill:
            extra[KD_KEY] = list(self.kd)
        return extra


@client_half
class OrderedDropout(ClientHalf):
    """FjORD's device: a width drawn per step, the p_max model as its teacher (`od-kd`)."""

    key = RATES_KEY

    def __init__(self, value: object, kd: Sequence[float] | None = None) -> None:
        rates = list(value) if isinstance(value, list) else []
        numbers = all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates)
        if not rates or not numbers or not all(0 < r <= rates[0] <= 1 for r in rates):
            raise self.malformed(value, "a list of widths in (0, 1], the largest first")
        super().__init__(value)
        self.rates = [float(r) for r in rates]
        self.kd = None if kd is None else (float(kd[0]), float(kd[1]))
        self.p = self.rates[0]
        self.config = ""  # the model config (JSON), from local_model

    @classmethod
    def from_config(cls, value: object, config: Mapping[str, object]) -> ClientHalf:
        kd = config.get(KD_KEY)
        if kd is None:
            return cls(value)
        ok = isinstance(kd, list) and len(kd) == 2 and 0 <= kd[0] <= 1 and kd[1] > 0
        if not ok:
            raise cls.malformed(kd, f"{KD_KEY}: [alpha in [0, 1], temperature > 0]")
        assert isinstance(kd, list)
        return cls(value, [float(kd[0]), float(kd[1])])

    def local_model(self, model: nn.Module, config: Mapping[str, Any]) -> nn.Module:
        self.config = json.dumps(dict(config), sort_keys=True)
        return model  # the p_max submodel (`model-rate`'s half built it)

    def before_step(self, step: int, seed: int) -> None:
        rng = np.random.default_rng([seed, step])
        self.p = self.rates[int(rng.integers(len(self.rates)))]

    def objective(self, model: nn.Module) -> Objective | None:
        def loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            student = None if self.p == self.rates[0] else self._prefix(model)
            if self.kd is None:
                return F.cross_entropy(net(x) if student is None else student(x), y)
            teacher = net(x)
            out = teacher if student is None else student(x)
            return F.cross_entropy(teacher, y) + distillation(out, teacher, y, *self.kd)

        return loss

    def _prefix(self, model: nn.Module) -> Prefix:
        return Prefix(model, self.config, self.p, self.rates[0])


def distillation(
    student: torch.Tensor, teacher: torch.Tensor, y: torch.Tensor, alpha: float, t: float
) -> torch.Tensor:
    """(1 - alpha) CE(student, y) + alpha T^2 KL(teacher/T || student/T), teacher detached."""
    soft = F.log_softmax(teacher.detach() / t, dim=1)
    kl = F.kl_div(F.log_softmax(student / t, dim=1), soft, reduction="batchmean", log_target=True)
    return (1 - alpha) * F.cross_entropy(student, y) + alpha * t * t * kl


class Prefix:
    """The p-prefix of a p_max model, run functionally on its tensors (gradients reach them).

    BatchNorm's running statistics of the prefix are written back after the
    forward, so the p_max model's buffers see every width's update: as new
    tensors, never in place, since the teacher's forward of the same step saved
    the old ones for its backward.
    """

    def __init__(self, model: nn.Module, config_json: str, p: float, top: float) -> None:
        self.model = model
        self.sub, self.index = _prefix_of(config_json, p, top)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        full = dict(self.model.named_parameters()) | dict(self.model.named_buffers())
        taken = {k: _take(full[k], idx) for k, idx in self.index.items()}
        out = functional_call(self.sub, taken, (x,))
        with torch.no_grad():
            for name, _ in self.sub.named_buffers():
                if full[name].dim() and full[name].is_floating_point():
                    merged = full[name].clone()
                    merged[torch.meshgrid(*self.index[name], indexing="ij")] = taken[name]
                    owner, _, leaf = name.rpartition(".")
                    setattr(self.model.get_submodule(owner), leaf, merged)
        return out


def _take(t: torch.Tensor, idx: width.Index) -> torch.Tensor:
    """`t` at the indices (a differentiable gather; a 0-d tensor is itself)."""
    return t if t.dim() == 0 else t[torch.meshgrid(*idx, indexing="ij")]


@functools.lru_cache(maxsize=16)
def _prefix_of(config_json: str, p: float, top: float) -> tuple[nn.Module, dict[str, width.Index]]:
    """The p submodel's module and its entries' indices in the `top` submodel (first channels)."""
    config = json.loads(config_json)
    sub = width.build_at(config, p).train()
    top_state = width.build_at(config, top).state_dict()
    shapes = {k: tuple(v.shape) for k, v in sub.state_dict().items()}
    index = width.indices(top_state, shapes, width.width_rule(config), width.Extraction("first"))
    return sub, index
