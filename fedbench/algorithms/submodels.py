"""Per-device submodels: the strategy of HeteroFL, FjORD and FedRolex, its client half, rates.

Every device trains a width-scaled submodel of the global model
(fedbench.models.width) at its own rate r. The server

- chooses each device's largest rate from what it can afford
  (`rate_policy`, `choose_rates`): `fixed` (everyone `rate`), `budget` (the
  predicted peak memory fits the device's budget) or `deadline` (the
  predicted round time, compute plus network, meets
  `round_close.deadline_s`); the predictions are the emulator's for each
  rate's own submodel (fedbench.server.submodels);
- sends each device the submodel's tensors with `model-rate` (and
  `model-offset`, the rolling window's start) in its train config;
- averages every global entry over the devices that held it, weighted by
  num-examples; entries nobody held keep their value (width.aggregate).

Clients must send back the trained submodel (one ArrayRecord) and
`num-examples` and `model-rate` in their metrics (fedbench's train handler
does; the `model-rate` client half builds the submodel; `model-offset` is
informational).
Subclasses choose which channels a device holds (`extraction`) and the rate
it trains at this round (`round_rate`). Synchronous rounds only: a reply is
averaged into the model its round sent.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from torch import nn

from fedbench.algorithms.base import (
    PREDICTED,
    ClientHalf,
    Predict,
    Predictions,
    RunFacts,
    ServerHalf,
    client_half,
)
from fedbench.arrays import decode
from fedbench.errors import FedbenchError
from fedbench.models import width

RATE = "model-rate"
OFFSET = "model-offset"
POLICIES = ("fixed", "budget", "deadline")
DEFAULT_RATES = (1.0, 0.5, 0.25, 0.125, 0.0625)


def choose_rates(
    policy: str,
    rates: Sequence[float],
    fixed: float,
    peak_mb: Mapping[float, np.ndarray],
    budget_mb: np.ndarray,
    round_s: Mapping[float, np.ndarray],
    deadline_s: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each device's rate and whether it fits at all (False: not even the smallest rate).

    `peak_mb[r]` / `round_s[r]`: per device, the predicted peak memory and
    round time at rate r (inf where the emulator predicts no completion);
    `budget_mb`: NaN where nothing limits the device. A device that fits no
    rate gets the smallest one and False.
    """
    ordered = sorted(rates, reverse=True)
    n = len(budget_mb)
    budget = np.where(np.isnan(budget_mb), np.inf, budget_mb)

    def fits_memory(r: float) -> np.ndarray:
        peak = np.nan_to_num(peak_mb[r], nan=0.0)
        return np.asarray(peak <= budget)

    if policy == "fixed":
        return np.full(n, fixed), fits_memory(fixed)
    if policy not in POLICIES:
        raise FedbenchError(f"algorithm.rate_policy={policy!r}; valid: {', '.join(POLICIES)}")
    if policy == "deadline" and deadline_s is None:
        raise FedbenchError(
            "algorithm.rate_policy=deadline needs round_close.deadline_s "
            "(e.g. round_close=deadline round_close.deadline_s=60)"
        )
    chosen = np.full(n, math.nan)
    for r in ordered:  # largest first: a device keeps the first rate that fits
        ok = fits_memory(r)
        if policy == "deadline":
            assert deadline_s is not None
            ok &= np.nan_to_num(round_s[r], nan=0.0) <= deadline_s
        chosen[np.isnan(chosen) & ok] = r
    fits = ~np.isnan(chosen)
    chosen[~fits] = ordered[-1]
    return chosen, fits


def check_rates(rates: object) -> tuple[float, ...]:
    """`algorithm.rates` as given: distinct width rates in (0, 1], largest first.

    A rate given twice or out of order is refused rather than silently
    deduplicated and sorted: `[0.5, 0.5]` usually means a rate the user meant
    to write is missing, and the order they wrote is what they will read in
    the records (`model_rate`) and figures.
    """
    what = "give distinct width rates in (0, 1], largest first"
    valid = f"{what}, e.g. [1.0, 0.5, 0.25]"
    items = list(rates) if isinstance(rates, Sequence) and not isinstance(rates, str) else None
    if not items or any(isinstance(r, bool) or not isinstance(r, (int, float)) for r in items):
        raise FedbenchError(f"algorithm.rates={rates!r}: {valid}")
    values = tuple(float(r) for r in items)
    shown = f"algorithm.rates={list(values)}"
    if any(not 0 < r <= 1 for r in values):
        raise FedbenchError(f"{shown}: {valid}")
    twice = sorted({r for r in values if values.count(r) > 1}, reverse=True)
    if twice:
        raise FedbenchError(
            f"{shown}: {', '.join(f'{r:g}' for r in twice)} is given twice; {valid}"
        )
    ordered = sorted(values, reverse=True)
    if list(values) != ordered:
        raise FedbenchError(f"{shown}: not largest first; {what}: algorithm.rates={ordered}")
    return values


class SubmodelStrategy(FedAvg, ServerHalf):
    """FedAvg over per-device width submodels (see the module docstring).

    Its server half (fedbench.algorithms.base.ServerHalf): fedbench's own model
    with a width rule, synchronous rounds, a deadline for `rate_policy=deadline`
    (`check_run`); each rate's submodel predicted and each device's rate chosen
    (`fit_devices`); every rate's submodel scored (`evaluated_rates`).
    """

    def __init__(
        self,
        rate_policy: str = "budget",
        rates: Sequence[float] = DEFAULT_RATES,
        rate: float = 1.0,
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
        if rate_policy not in POLICIES:
            raise FedbenchError(
                f"algorithm.rate_policy={rate_policy!r}; valid: {', '.join(POLICIES)}"
            )
        rates = check_rates(rates)
        if not 0 < rate <= 1:
            raise FedbenchError(f"algorithm.rate={rate!r}: a number in (0, 1]")
        self.rate_policy = rate_policy
        self.rates = rates
        self.rate = float(rate)
        self.model: dict[str, Any] | None = None  # the model config (`bind`)
        self.device_of: Callable[[Message], int] = lambda msg: int(msg.metadata.dst_node_id)
        self.device_rates = np.empty(0)  # per device: its largest affordable rate
        self._global: dict[str, torch.Tensor] = {}
        self._shapes: dict[float, dict[str, tuple[int, ...]]] = {}

    def bind(
        self,
        model: Mapping[str, Any],
        device_rates: np.ndarray,
        device_of: Callable[[Message], int],
    ) -> None:
        """The model config to cut submodels of, each device's largest rate, a message's device.

        `device_of` reads the device a configured message is for (the server's
        offer numbers its nodes; fedbench.server.offer).
        """
        self.model = dict(model)
        self.device_of = device_of
        width.width_rule(self.model)  # refuses a model without a width rule
        self.device_rates = np.asarray(device_rates, dtype=np.float64)

    def check_run(self, run: RunFacts) -> None:
        name = type(self).__name__
        if run.app is not None:
            raise FedbenchError(
                f"algorithm={name}: submodels need fedbench's own model and train handler; "
                f"app={run.app} brings its own"
            )
        width.width_rule(run.model)
        if not run.synchronous:
            raise FedbenchError(
                f"algorithm={name} runs synchronous rounds only (mode=sync): a reply is averaged "
                f"into the model its round sent, and {run.mode} mixes rounds"
            )
        if self.rate_policy == "deadline" and run.deadline_s is None:
            raise FedbenchError(
                "algorithm.rate_policy=deadline needs round_close.deadline_s "
                "(e.g. round_close=deadline round_close.deadline_s=60)"
            )

    def fit_devices(self, run: RunFacts, predict: Predict) -> tuple[Predictions, np.ndarray]:
        """Each rate's submodel predicted, each device's rate chosen (`rate_policy`) and bound.

        Devices without a prediction (host, physical) get the largest rate
        (fixed: `rate`): nothing is known to limit them. The predictions kept
        are those of each device's own rate.
        """
        config = dict(run.model)
        considered = self.rates if self.rate_policy != "fixed" else (self.rate,)
        per_rate = {r: predict(width.build_at(config, r)) for r in considered}
        rates, fits = choose_rates(
            self.rate_policy,
            list(per_rate),
            self.rate,
            {r: p["pred_peak_mem_mb"] for r, p in per_rate.items()},
            next(iter(per_rate.values()))["mem_budget_mb"],
            {r: p["pred_latency_s"] + np.nan_to_num(p["pred_comm_s"]) for r, p in per_rate.items()},
            run.deadline_s,
        )
        kept = {k: next(iter(per_rate.values()))[k].copy() for k in PREDICTED}
        for rate, pred in per_rate.items():
            for key in PREDICTED:
                kept[key][rates == rate] = pred[key][rates == rate]
        self.bind(config, rates, run.device_of)
        return kept, fits

    def evaluated_rates(self) -> tuple[float, ...]:
        return self.rates

    @property
    def trained_rate(self) -> float:
        """The widest submodel any device trains: the model this federation produces.

        1 (the whole model) when rates follow the devices' budgets or the
        deadline; `rate` under `fixed`, where no device ever trains the channels
        beyond it, so the whole model's accuracy says nothing about the run.
        """
        return self.rate if self.rate_policy == "fixed" else 1.0

    # What subclasses choose.
    def extraction(self, server_round: int) -> width.Extraction:
        return width.Extraction("first")

    def round_rate(self, server_round: int, device: int) -> float:
        return float(self.device_rates[device])

    def extra_config(self, rate: float) -> dict[str, Any]:
        """What a device's train config carries besides `model-rate` and `model-offset`."""
        return {}

    # Flower's strategy interface.
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        messages = list(super().configure_train(server_round, arrays, config, grid))
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}.bind was not called before round 1")
        self._global = {k: torch.from_numpy(decode(a).copy()) for k, a in arrays.items()}
        how = self.extraction(server_round)
        out = []
        for msg in messages:
            device = self.device_of(msg)
            rate = self.round_rate(server_round, device)
            sub = width.extract(self._global, self._index(rate, how))
            extra = self.extra_config(rate)
            cfg = ConfigRecord({**dict(config), RATE: rate, OFFSET: how.offset, **extra})
            content = RecordDict(
                {self.arrayrecord_key: ArrayRecord(sub), self.configrecord_key: cfg}
            )
            out.append(
                Message(
                    content=content,
                    dst_node_id=msg.metadata.dst_node_id,
                    message_type=msg.metadata.message_type,
                )
            )
        return out

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        valid, _ = self._check_and_log_replies(replies, is_train=True, validate=False)
        if not valid or not self._global:
            return None, None
        updates = []
        for msg in valid:
            metrics = msg.content.metric_records.get("metrics")
            arrays = next(iter(msg.content.array_records.values()), None)
            if metrics is None or arrays is None:
                continue
            rate = float(metrics.get(RATE, 1.0))  # type: ignore[arg-type]
            how = self.extraction(server_round)  # synchronous: the round's own window
            tensors = {k: torch.from_numpy(decode(a).copy()) for k, a in arrays.items()}
            weight = float(metrics.get(self.weighted_by_key, 0))  # type: ignore[arg-type]
            updates.append((self._index(rate, how), tensors, weight))
        merged = width.aggregate(self._global, updates)
        metrics_out = self.train_metrics_aggr_fn([m.content for m in valid], self.weighted_by_key)
        return ArrayRecord(merged), metrics_out

    def _index(self, rate: float, how: width.Extraction) -> dict[str, width.Index]:
        assert self.model is not None
        shapes = self._shapes.get(rate)
        if shapes is None:
            sub = width.build_at(self.model, rate)
            shapes = {k: tuple(v.shape) for k, v in sub.state_dict().items()}
            self._shapes[rate] = shapes
        return width.indices(self._global, shapes, width.width_rule(self.model), how)


@client_half
class ModelRate(ClientHalf):
    """The client half: train the submodel at the rate the server sent."""

    key = RATE
    echo = True  # the server's aggregation reads which rate a reply trained

    def __init__(self, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise self.malformed(value, "a number in (0, 1]")
        super().__init__(value)
        self.rate = float(value)

    def local_model(self, model: nn.Module, config: Mapping[str, Any]) -> nn.Module:
        return _submodel(json.dumps(dict(config), sort_keys=True), self.rate)

    def label(self) -> str:
        return f"@r{self.rate:g}"


@functools.lru_cache(maxsize=8)
def _submodel(config_json: str, rate: float) -> nn.Module:
    # One module per rate and worker, like the handler's full model: every
    # message loads the server's weights into it.
    return width.build_at(json.loads(config_json), rate)
