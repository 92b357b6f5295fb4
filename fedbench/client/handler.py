"""fedbench's own train handler: the experiment's model, data and local training.

It runs under the device mod (fedbench.client.mod.DeclaredDeviceMod), which
seated the message: it takes the device's data for the round from the
scenario, asks the memory planner for a plan that fits the device's budget
(the seat's meter), trains for real and reports the cost through
`seat.measure`. What the Flower strategy sends in the message's config is
honoured: `proximal-mu` (FedProx) adds the proximal term to local training.
A worker keeps its model, scenario and data context between messages.
"""

from __future__ import annotations

import functools

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from torch import nn

from fedbench.client.seat import Seat, current_seat
from fedbench.devices.meter import TrainJob
from fedbench.errors import FedbenchError
from fedbench.experiment.build import build_model, build_scenario
from fedbench.experiment.schema import Experiment, ModelConfig
from fedbench.protocol import METRICS, NUM_EXAMPLES
from fedbench.scenarios.context import data_context
from fedbench.train.loop import TrainParams, step_sizes, train_local
from fedbench.train.round_plan import plan_round

PROXIMAL_MU = "proximal-mu"  # FedProx's key in the train config (flwr.serverapp.strategy.FedProx)


def train(msg: Message, context: Context) -> Message:
    seat = current_seat()
    if seat is None:
        raise FedbenchError("fedbench's train handler runs under the device mod only")
    arrays_key, arrays = _only_arrays(msg)
    model = _model(seat.experiment.model)
    model.load_state_dict(arrays.to_torch_state_dict())
    params = train_params(seat.experiment, _config(msg))
    loss, trained, n = _train(seat, model, params)
    content = RecordDict(
        {METRICS: MetricRecord({NUM_EXAMPLES: n if trained else 0, "train_loss": _finite(loss)})}
    )
    if trained:
        content[arrays_key] = ArrayRecord(model.state_dict())
    return Message(content, reply_to=msg)


def train_params(experiment: Experiment, config: ConfigRecord | None) -> TrainParams:
    t = experiment.train
    mu = config.get(PROXIMAL_MU, 0.0) if config is not None else 0.0
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not mu >= 0:
        raise FedbenchError(f"malformed server message: {PROXIMAL_MU}={mu!r}")
    return TrainParams(
        batch_size=t.batch_size,
        local_epochs=t.local_epochs,
        lr=t.lr,
        momentum=t.momentum,
        weight_decay=t.weight_decay,
        bn_momentum_scaled=t.bn_momentum_scaled,
        optimizer=t.optimizer,
        proximal_mu=float(mu),
    )


def _train(seat: Seat, model: nn.Module, params: TrainParams) -> tuple[float | None, bool, int]:
    experiment, task = seat.experiment, seat.task
    ctx = data_context(experiment, seat.num_devices)
    data = build_scenario(experiment).device_data(ctx, task.device_index, task.day)
    job = TrainJob(
        model_name=experiment.model.name,
        input_shape=experiment.model.input_shape,
        batch_sizes=step_sizes(len(data), params.batch_size, params.local_epochs),
        model_bytes=sum(p.numel() * p.element_size() for p in model.state_dict().values()),
        now_s=task.now_s,
        state=task.state,
    )
    seed = experiment.seed * 1_000_003 + task.round * 10_007 + task.device_index
    # The memory plan for the device's budget (fedbench.train.round_plan).
    rp = plan_round(model, job, seat.meter, experiment.train.memory_planner)
    torch.manual_seed(seed)
    loss, cost = seat.measure(
        model,
        rp.job,
        lambda: train_local(model, data, params, seed, plan=rp.job.plan, adapt=rp.adapt),
    )
    seat.measured.cost = rp.explain(cost)
    return loss, loss is not None and seat.measured.cost.status == "ok", len(data)


@functools.lru_cache(maxsize=2)
def _model(config: ModelConfig) -> nn.Module:
    # Built once per worker: every message loads the global weights (parameters
    # and buffers) into it, and the optimizer is new every round.
    return build_model(config)


def _finite(loss: float | None) -> float:
    return float("nan") if loss is None else loss


def _only_arrays(msg: Message) -> tuple[str, ArrayRecord]:
    records = list(msg.content.array_records.items())
    if len(records) != 1:
        raise FedbenchError(
            f"malformed server message: expected one ArrayRecord, got {len(records)}"
        )
    return records[0]


def _config(msg: Message) -> ConfigRecord | None:
    return next(iter(msg.content.config_records.values()), None)
