"""fedbench's own train handler: the experiment's model, data and local training.

It runs under the device mod (fedbench.client.mod.DeclaredDeviceMod), which
seated the message: it takes the device's data for the round from the
scenario, asks the memory planner for a plan that fits the device's budget
(the seat's meter), trains for real and reports the cost through
`seat.measure`. Local training is what the message's train config says, read
the Flower way: the hyperparameters (`lr`, `local-epochs`, `batch-size`, ...:
fedbench.train.hyper) and every key an algorithm's client half is registered
for (`proximal-mu`: FedProx's proximal term; fedbench.algorithms).
A worker keeps its model, scenario and data context between messages. When
one call carries several devices (fedbench.client.group), those that can
train together do so in one vmapped pass if that is measured to be faster
(fedbench.train.batched); each device is still metered and reported alone.

Where it trains is the runtime's `accelerator` (fedbench.train.accelerator):
the worker's model, the global weights, each device's data (kept there
across rounds, fedbench.train.resident) and the optimizer state live on that
torch device. What a device costs does not depend on it: the meter measures
the workload on a CPU copy of the model.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from torch import nn

from fedbench.algorithms.base import client_halves, load_algorithm
from fedbench.arrays import decode, state_dict_record
from fedbench.client.caps import planning_share, warm_up
from fedbench.client.group import current_group
from fedbench.client.seat import Seat, current_seat, seat_of
from fedbench.core.meter import TrainJob
from fedbench.core.plans import FULL
from fedbench.data.source import Tensors
from fedbench.errors import FedbenchError
from fedbench.experiment.build import build_model
from fedbench.experiment.schema import Experiment, ModelConfig
from fedbench.measure.workload import measure_workload
from fedbench.protocol import METRICS, NUM_EXAMPLES
from fedbench.runtime.base import build_runtime
from fedbench.scenarios.base import build_scenario
from fedbench.scenarios.context import data_context
from fedbench.train import hyper
from fedbench.train.accelerator import worker_device
from fedbench.train.batched import (
    batchable,
    batching_pays,
    chunk_for,
    device_bytes,
    train_cohort,
)
from fedbench.train.loop import TrainParams, step_sizes, train_local
from fedbench.train.resident import Resident
from fedbench.train.round_plan import RoundPlan, plan_round


def train(msg: Message, context: Context) -> Message:
    seat = current_seat()
    if seat is None:
        raise FedbenchError("fedbench's train handler runs under the device mod only")
    arrays_key, arrays = _only_arrays(msg)
    params = train_params(seat.experiment, _config(msg))
    device = _device(seat.experiment)
    model = _model(seat.experiment.model, device)
    state = _global_state(arrays, device)
    for half in params.halves:  # a submodel algorithm trains the width it was sent
        model = half.local_model(model, seat.experiment.model.to_plain()).to(device)
        state = half.receive(state)  # its own entries out (SCAFFOLD's control variate)
    model.load_state_dict(state)
    for half in params.halves:  # the device's own state, kept across rounds
        half.begin(model, context.state)
    loss, trained, n = _train(seat, model, params, context)
    metrics: dict[str, int | float | list[int] | list[float]] = {NUM_EXAMPLES: n if trained else 0}
    metrics["train_loss"] = _finite(loss)
    metrics.update({h.key: float(h.value) for h in params.halves if h.echo})  # type: ignore[arg-type]
    content = RecordDict({METRICS: MetricRecord(metrics)})
    if trained:
        content[arrays_key] = state_dict_record(model.state_dict())
        for half in params.halves:  # the reply hook: what the algorithm adds to the update
            half.reply(model, content, context.state)
    return Message(content, reply_to=msg)


# The last global model read, and the device it was put on.
_GLOBAL: list[tuple[ArrayRecord, torch.device, dict[str, torch.Tensor]]] = []


def _global_state(arrays: ArrayRecord, device: torch.device) -> dict[str, torch.Tensor]:
    """The message's global model as tensors on `device`, read once for a group's devices.

    The devices of one call (fedbench.client.group) share the message's
    ArrayRecord object; reading it once spares every further device a parse
    of every array (and a copy to the GPU). load_state_dict copies, so the
    tensors are never written.
    """
    if _GLOBAL and _GLOBAL[0][0] is arrays and _GLOBAL[0][1] == device:
        return _GLOBAL[0][2]
    state = {k: torch.from_numpy(decode(a).copy()).to(device) for k, a in arrays.items()}
    _GLOBAL[:] = [(arrays, device, state)]
    return state


@functools.lru_cache(maxsize=2)
def _device(experiment: Experiment) -> torch.device:
    """Where this worker trains: the runtime's accelerator as the runtime resolved it."""
    return worker_device(build_runtime(experiment).worker_accelerator())


@functools.lru_cache(maxsize=2)
def _resident(experiment: Experiment, device: torch.device) -> Resident:
    # One per experiment: a data key names a device's data within one experiment only.
    return Resident(device)


def train_params(experiment: Experiment, config: ConfigRecord | None) -> TrainParams:
    """Local training as the round's train config says (the experiment's where it is silent)."""
    config = config if config is not None else ConfigRecord()
    load_algorithm(experiment.algorithm.target)  # registers its client half, if it has one
    params = hyper.from_config(config, experiment.train.params())
    return dataclasses.replace(params, halves=client_halves(config))


@dataclass(frozen=True)
class Prepared:
    """A device's round before it trains: its data, memory plan and seed."""

    seat: Seat
    data: Tensors
    plan: RoundPlan
    seed: int

    def batchable(self, model: nn.Module) -> bool:
        """Trained in a plain loop of full batches on a device predicted to fit (emulated)."""
        if self.plan.job.plan != FULL or self.plan.adapt is not None:
            return False
        predicted = self.seat.meter.predict(model, self.plan.job)
        return predicted is not None and predicted.status == "ok"


def _prepare(seat: Seat, model: nn.Module, params: TrainParams) -> Prepared:
    experiment, task = seat.experiment, seat.task
    ctx = data_context(experiment, seat.num_devices)
    scenario = build_scenario(experiment)
    resident = _resident(experiment, next(model.parameters()).device)
    data = resident.get(
        scenario.data_key(task.device_index, task.day),
        lambda: scenario.device_data(ctx, task.device_index, task.day),
    )
    job = TrainJob(
        model_name=experiment.model.name + "".join(h.label() for h in params.halves),
        input_shape=experiment.model.input_shape,
        batch_sizes=step_sizes(len(data), params.batch_size, params.local_epochs),
        model_bytes=sum(p.numel() * p.element_size() for p in model.state_dict().values()),
        now_s=task.now_s,
        state=task.state,
        input_dtype=experiment.model.torch_dtype,
        input_high=experiment.model.input_high,
    )
    seed = experiment.seed * 1_000_003 + task.round * 10_007 + task.device_index
    # The memory plan for the device's budget (fedbench.train.round_plan).
    rp = plan_round(model, job, seat.meter, experiment.train.memory_planner, planning_share())
    return Prepared(seat, data, rp, seed)


def _train(
    seat: Seat, model: nn.Module, params: TrainParams, context: Context
) -> tuple[float | None, bool, int]:
    prepared = _prepare(seat, model, params)
    rp, data, seed = prepared.plan, prepared.data, prepared.seed
    done = _from_batch(prepared, model, params, context)
    alone = done if isinstance(done, str) else None  # why its batched group left it out
    done = done if isinstance(done, Batched) else None

    def run() -> float:
        if done is None:
            return train_local(model, data, params, seed, plan=rp.job.plan, adapt=rp.adapt)
        model.load_state_dict(done.state)
        return done.loss

    torch.manual_seed(seed)
    loss, cost = seat.measure(model, rp.job, run)
    cost = rp.explain(cost)
    if done is not None:  # never silently: the plan column says the step was batched
        cost = dataclasses.replace(cost, plan=f"{cost.plan} vmap{done.devices}")
    elif alone is not None:
        cost = dataclasses.replace(cost, plan=f"{cost.plan} alone:{alone}")
    seat.measured.cost = cost
    return loss, loss is not None and cost.status == "ok", len(data)


@dataclass(frozen=True)
class Batched:
    state: dict[str, torch.Tensor]
    loss: float
    devices: int  # trained together


# The current group's results by device index: a device trained in its batched pass, or
# why a batched group left it to train by itself: "plan" (its memory plan or predicted
# status cannot be batched), "gpu-memory" (it did not fit the GPU even alone).
_BATCH: dict[str, dict[int, Batched | str]] = {}


def _from_batch(
    prepared: Prepared, model: nn.Module, params: TrainParams, context: Context
) -> Batched | str | None:
    """This device's training from its group's batched pass, if the group was batched.

    The first device of a group (fedbench.client.group) prepares every device
    of it, and trains those that can train together in one vmapped pass
    (fedbench.train.batched) when that is measured to be faster here; each
    device's own call then takes its result. `model` holds the global weights.
    """
    group = current_group()
    if len(group) < 2 or build_runtime(prepared.seat.experiment).enforce_caps:
        return None  # capped, each device trains in its own process under its own limits
    if any(half.label() for half in params.halves):
        return None  # a submodel algorithm sends each device its own slice: no shared model
    key = group[0].metadata.message_id or str(id(group))
    if key not in _BATCH:
        _BATCH.clear()
        _BATCH[key] = _train_group(group, model, params, context)
    return _BATCH[key].get(prepared.seat.device.index)


def _train_group(
    group: Sequence[Message], model: nn.Module, params: TrainParams, context: Context
) -> dict[int, Batched | str]:
    ready: list[Prepared] = []
    planned: list[Prepared] = []
    for msg in group:
        seat = seat_of(msg, context)
        if seat is not None:
            prepared = _prepare(seat, model, params)
            (ready if prepared.batchable(model) else planned).append(prepared)
    datas = [p.data for p in ready]
    if not batchable(model, datas, params):
        return {}
    device = next(model.parameters()).device
    chunk = chunk_for(device, _step_bytes(ready[0], model, params), len(ready))
    # Measured at the chunk that will run: a whole cohort may not fit the GPU at once.
    if chunk < 2 or not batching_pays(model, datas[:chunk], params):
        return {}
    results, _ = train_cohort(model, datas, params, [p.seed for p in ready], chunk)
    done: dict[int, Batched | str] = {p.seat.device.index: "plan" for p in planned}
    for p, result in zip(ready, results, strict=True):
        if result is None:
            done[p.seat.device.index] = "gpu-memory"
        else:
            done[p.seat.device.index] = Batched(result[0], result[1], len(ready))
    return done


def _step_bytes(prepared: Prepared, model: nn.Module, params: TrainParams) -> int:
    """What one device's step holds (the measured workload's memory terms); 0 on the CPU,
    where a chunk is never limited by memory."""
    if next(model.parameters()).device.type == "cpu":
        return 0
    job = prepared.plan.job
    workload = measure_workload(
        model,
        job.input_shape,
        min(params.batch_size, len(prepared.data)),
        model_name=job.model_name,
        optimizer=params.optimizer.workload(params.momentum),
        input_dtype=job.input_dtype,
        input_high=job.input_high,
    )
    return device_bytes(workload)


@warm_up
def _warm(seat: Seat) -> None:
    """Built in the worker before a capped call forks (fedbench.client.caps.warm_up)."""
    if seat.experiment.app is None:  # fedbench's own app: this handler's caches
        data_context(seat.experiment, seat.num_devices)
        _model(seat.experiment.model, _device(seat.experiment))


@functools.lru_cache(maxsize=2)
def _model(config: ModelConfig, device: torch.device) -> nn.Module:
    # Built once per worker: every message loads the global weights (parameters
    # and buffers) into it, and the optimizer is new every round.
    return build_model(config).to(device)


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
