"""SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging for Federated
Learning", ICML 2020), Algorithm 1 with option II for the client control variate.

The server keeps the model x and a control variate c; each device i keeps its
own control variate c_i across rounds (0 before its first round). A round:

- the server sends x and c (c beside the model in the same ArrayRecord, under
  `scaffold-c/<entry>`, and `scaffold: true` in the train config);
- the device trains K optimizer steps from x with every gradient corrected
  by c - c_i (y <- y - lr (g(y) - c_i + c)), then sets
  c_i+ = c_i - c + (x - y) / (K lr) (option II), keeps c_i+ in its
  Context.state and sends back y and delta c_i = c_i+ - c_i (under the
  `scaffold-c/` entries of its reply);
- the server sets x <- x + global_lr * mean_i(y_i - x) and
  c <- c + (1/N) sum_i delta c_i, N the fleet's size.

Clients must send: the trained model and the control variate delta in one
ArrayRecord with exactly the keys they were sent, `num-examples` in
`metrics` (fedbench's train handler, with the `scaffold` client half, does).

How fedbench's version differs from the paper, and why:

- c_i lives in the device's Context.state, which fedbench carries with the
  device's messages in simulation (a worker serves many devices); a device's
  emulated upload is costed for the model only, not the model and delta c
  (the paper's 2x communication), because the meter costs the model it
  trains. The state is not checkpointed: a resumed run restarts every c_i
  at 0 (c itself is in the global arrays, so it resumes).
- Control variates exist for every floating-point entry of the model; the
  device corrects its trainable parameters only, and sends delta c = 0 for
  buffers (BatchNorm's running statistics), so their c stays 0.
- The correction is added to the gradient before the local optimizer's
  step: with momentum or weight decay (fedbench's SGD settings) the update is
  not the paper's plain SGD step, and option II's (x - y) / (K lr) then
  estimates the mean corrected gradient only approximately.
- The mean over replies is unweighted (the paper's 1/|S|); Flower's FedAvg
  weights by examples. A device that failed or was refused sends nothing
  and keeps its old c_i (the paper assumes every sampled client replies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from torch import nn

from fedbench.algorithms.base import (
    ClientHalf,
    Predict,
    Predictions,
    RunFacts,
    ServerHalf,
    client_half,
)
from fedbench.arrays import decode, encode
from fedbench.errors import FedbenchError

KEY = "scaffold"  # the train config key: its client half corrects and replies
PREFIX = "scaffold-c/"  # a control variate's entry beside the model's
STATE = "scaffold-ci"  # the device's own control variate in its Context.state


def variate_key(name: str) -> str:
    return PREFIX + name


class Scaffold(FedAvg, ServerHalf):
    """SCAFFOLD's server: x and c out, y_i and delta c_i back (module docstring)."""

    def __init__(
        self,
        global_lr: float = 1.0,
        fraction_train: float = 1.0,
        fraction_evaluate: float = 0.0,
        min_train_nodes: int = 1,
        min_evaluate_nodes: int = 0,
        min_available_nodes: int = 1,
    ) -> None:
        super().__init__(
            fraction_train=fraction_train,
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=min_train_nodes,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
        )
        if isinstance(global_lr, bool) or not global_lr > 0:
            raise FedbenchError(f"algorithm.global_lr={global_lr!r}: a number > 0")
        self.global_lr = float(global_lr)
        self.devices = 0  # N, the fleet's size (fit_devices)
        self._sent: dict[str, np.ndarray] = {}  # x and c of the round

    # The server half.
    def check_run(self, run: RunFacts) -> None:
        if run.app is not None:
            raise FedbenchError(
                f"algorithm=scaffold needs fedbench's own train handler (its client half); "
                f"app={run.app} brings its own"
            )
        if not run.synchronous:
            raise FedbenchError(
                f"algorithm=scaffold runs synchronous rounds only (mode=sync): delta y_i is "
                f"averaged into the model its round sent, and {run.mode} mixes rounds"
            )

    def fit_devices(self, run: RunFacts, predict: Predict) -> tuple[Predictions, np.ndarray]:
        self.devices = run.devices
        return super().fit_devices(run, predict)

    def model_arrays(self, arrays: ArrayRecord) -> ArrayRecord:
        return ArrayRecord({k: a for k, a in arrays.items() if not k.startswith(PREFIX)})

    # Flower's strategy interface.
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._sent = with_variates({k: decode(a) for k, a in arrays.items()})
        config = ConfigRecord({**dict(config), KEY: True})
        sent = ArrayRecord({k: Array(np.array(v, order="C")) for k, v in self._sent.items()})
        return super().configure_train(server_round, sent, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        valid, _ = self._check_and_log_replies(replies, is_train=True, validate=False)
        updates = [next(iter(m.content.array_records.values())) for m in valid]
        if not updates or not self._sent:
            return None, None
        merged = scaffold_step(
            self._sent,
            [{k: decode(a) for k, a in u.items()} for u in updates],
            self.global_lr,
            self.devices or len(updates),
        )
        metrics = self.train_metrics_aggr_fn([m.content for m in valid], self.weighted_by_key)
        return ArrayRecord({k: Array(np.array(v, order="C")) for k, v in merged.items()}), metrics


def with_variates(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The global arrays with a control variate for every floating entry (0 where none yet)."""
    out = dict(arrays)
    for name, value in arrays.items():
        if not name.startswith(PREFIX) and value.dtype.kind == "f":
            out.setdefault(variate_key(name), np.zeros_like(value))
    return out


def scaffold_step(
    sent: Mapping[str, np.ndarray],
    updates: list[Mapping[str, np.ndarray]],
    global_lr: float,
    devices: int,
) -> dict[str, np.ndarray]:
    """x + global_lr mean(y_i - x) and c + (1/N) sum(delta c_i), in float64, sent's dtypes.

    An update without an entry leaves it as sent (a delta of 0).
    """
    out: dict[str, np.ndarray] = {}
    for name, value in sent.items():
        base = value.astype(np.float64)
        unchanged = np.zeros_like(base) if name.startswith(PREFIX) else base
        stacked = np.stack([u.get(name, unchanged) for u in updates]).astype(np.float64)
        if name.startswith(PREFIX):
            new = base + stacked.sum(axis=0) / devices
        else:
            new = base + global_lr * (stacked - base).mean(axis=0)
        out[name] = (np.rint(new) if value.dtype.kind in "iu" else new).astype(value.dtype)
    return out


@client_half
class ScaffoldClient(ClientHalf):
    """SCAFFOLD's device: corrected steps, option II's c_i+, delta c_i in the reply."""

    key = KEY

    def __init__(self, value: object, lr: float = 0.0) -> None:
        if value is not True:
            raise self.malformed(value, "true")
        super().__init__(value)
        self.lr = lr
        self.c: dict[str, torch.Tensor] = {}  # the server's c, by model entry
        self.c_i: dict[str, torch.Tensor] = {}
        self.x: dict[str, torch.Tensor] = {}  # the weights training started from
        self.shift: dict[int, torch.Tensor] = {}  # id(parameter) -> c - c_i
        self.steps = 0

    @classmethod
    def from_config(cls, value: object, config: Mapping[str, object]) -> ClientHalf:
        lr = config.get("lr")
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
            raise cls.malformed(value, f"with a train config lr > 0, got lr={lr!r}")
        return cls(value, float(lr))

    def corrects(self) -> bool:
        return True

    def receive(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        self.c = {k[len(PREFIX) :]: v for k, v in state.items() if k.startswith(PREFIX)}
        return {k: v for k, v in state.items() if not k.startswith(PREFIX)}

    def begin(self, model: nn.Module, saved: RecordDict) -> None:
        params = dict(model.named_parameters())
        mine = saved.array_records.get(STATE)
        stored = mine.to_torch_state_dict() if mine is not None else {}
        self.c_i = {k: stored.get(k, torch.zeros_like(p)).to(p) for k, p in params.items()}
        self.x = {k: p.detach().clone() for k, p in params.items()}
        self.shift = {
            id(p): self.c.get(k, torch.zeros_like(p)).to(p) - self.c_i[k] for k, p in params.items()
        }
        self.steps = 0

    def before_step(self, step: int, seed: int) -> None:
        self.steps += 1

    def correct(self, grad: torch.Tensor, weight: torch.Tensor, anchor: torch.Tensor) -> None:
        shift = self.shift.get(id(weight))
        if shift is not None:
            grad.add_(shift)

    def reply(self, model: nn.Module, content: RecordDict, saved: RecordDict) -> None:
        if self.steps == 0:
            return
        arrays = next(iter(content.array_records.values()))
        scale = 1.0 / (self.steps * self.lr)
        new: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for name, y in model.named_parameters():
                c = self.c.get(name, torch.zeros_like(y)).to(y)
                new[name] = self.c_i[name] - c + (self.x[name] - y) * scale  # option II
        for name in list(arrays.keys()):
            if name.startswith(PREFIX):
                continue
            delta = new[name] - self.c_i[name] if name in new else None
            value = decode(arrays[name])
            out = delta.detach().cpu().numpy() if delta is not None else np.zeros_like(value)
            if value.dtype.kind == "f":
                arrays[variate_key(name)] = encode(out.astype(value.dtype))
        saved[STATE] = ArrayRecord({k: v.detach().cpu() for k, v in new.items()})
