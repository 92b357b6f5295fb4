"""The ClientApp: one code path for every device, emulated or physical.

It rebuilds the experiment from the message (fedbench.config), loads the
global weights, takes the device's data for the day, and trains for real
under the device's meter. Whatever happens, it replies with a RoundReport:
a failure is a status with a reason, never a lost round.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
import traceback
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from fedbench.app.protocol import (
    ARRAYS,
    CONFIG,
    IDENTITY,
    METRICS,
    NUM_EXAMPLES,
    Identity,
    TrainTask,
)
from fedbench.config import from_flower
from fedbench.devices.faults import Fault, FaultModel, InjectedCrash, draw, fault_models
from fedbench.devices.meter import Cost, Meter, TrainJob
from fedbench.devices.meters import PHYSICAL, make_meter
from fedbench.fleet import DeviceSpec, expand_fleet
from fedbench.models import build_from_config
from fedbench.report.records import CSV_FIELDS, RECORD_KEY, RoundReport, to_record
from fedbench.scenarios.context import data_context
from fedbench.train.loop import TrainParams, step_sizes, train_local
from fedbench.train.round_plan import plan_round

app = ClientApp()


def build_model(experiment: Mapping[str, Any]) -> nn.Module:
    """The experiment's model, freshly initialised (seeded by the caller)."""
    return build_from_config(experiment["model"])


# Every message carries the same experiment, so what a client derives from it
# (fleet, meters, fault models) is built once per process, keyed by its JSON.
def _key(node: object) -> str:
    plain = OmegaConf.to_container(node) if isinstance(node, DictConfig) else node
    return json.dumps(plain, sort_keys=True)


@functools.lru_cache(maxsize=4)
def _fleet(fleet_json: str) -> tuple[DeviceSpec, ...]:
    return expand_fleet(json.loads(fleet_json))


def fleet_of(experiment: DictConfig) -> tuple[DeviceSpec, ...]:
    return _fleet(_key(experiment["fleet"]))


@functools.lru_cache(maxsize=64)
def _meter(profile: str, knobs_json: str) -> Meter:
    return make_meter(profile, json.loads(knobs_json))


def meter_of(experiment: DictConfig, device: DeviceSpec) -> Meter:
    return _meter(device.profile, _key(experiment["fleet"].get("knobs") or {}))


def _partition_id(context: Context) -> int:
    value = context.node_config.get("partition-id", -1)
    return int(value)  # type: ignore[arg-type]


@app.query()
def identify(msg: Message, context: Context) -> Message:
    """Tell the server which device of the fleet this node is.

    A node started with a partition id is that device of the fleet. A
    physical device (`python -m fedbench.device`) has none: it announces its
    own name and profile (node config `device-name`, `profile`) and the
    server seats it in a free `physical` slot of the fleet.
    """
    experiment = from_flower(msg.content.config_records[CONFIG])
    pid = _partition_id(context)
    fleet = fleet_of(experiment)
    name = context.node_config.get("device-name")
    if pid < 0 and isinstance(name, str) and name:
        profile = str(context.node_config.get("profile", PHYSICAL))
        identity = Identity(-1, name, profile, _meter(PHYSICAL, "{}").kind)
        return Message(RecordDict({IDENTITY: identity.to_config()}), reply_to=msg)
    device = (
        fleet[pid] if 0 <= pid < len(fleet) else DeviceSpec(pid, f"node-{context.node_id}", "host")
    )
    identity = Identity(pid, device.name, device.profile, meter_of(experiment, device).kind)
    return Message(RecordDict({IDENTITY: identity.to_config()}), reply_to=msg)


@app.train()
def train(msg: Message, context: Context) -> Message:
    wall_start = time.perf_counter()
    config = msg.content.config_records[CONFIG]
    experiment = from_flower(config)
    task = TrainTask.from_config(config)
    device = fleet_of(experiment)[task.device_index]
    meter = meter_of(experiment, device)
    torch.set_num_threads(int(experiment["runtime"].get("client_cpus", 1)))
    base = RoundReport(
        round=task.round,
        day=task.day,
        node=context.node_id,
        device=device.name,
        profile=device.profile,
        kind=meter.kind,
        status="ok",
    )
    fault = draw(
        _faults(experiment), device.profile, int(experiment["seed"]), task.round, task.device_index
    )
    arrays: ArrayRecord | None = None
    if fault.kind == "dropout":
        report = base.with_status("dropped", "injected fault: dropout before training")
    else:
        try:
            model = build_model(experiment)
            model.load_state_dict(msg.content.array_records[ARRAYS].to_torch_state_dict())
            report, trained = _train(experiment, task, device, meter, model, base)
            if trained:
                arrays = ArrayRecord(model.state_dict())
        except Exception as exc:  # noqa: BLE001 - a device failure is data, reported with its reason
            reason = f"{type(exc).__name__}: {exc}"
            report = base.with_status("failed", reason[:500])
            traceback.print_exc()
        report, arrays = inject(fault, report, arrays)
    report = replace(report, host_wall_s=time.perf_counter() - wall_start)
    content = RecordDict(
        {
            METRICS: MetricRecord({NUM_EXAMPLES: report.num_examples if arrays else 0}),
            RECORD_KEY: to_record(report),
        }
    )
    if arrays is not None:
        content[ARRAYS] = arrays
    return Message(content, reply_to=msg)


@functools.lru_cache(maxsize=8)
def _fault_models(faults_json: str) -> dict[str, FaultModel]:
    return fault_models(json.loads(faults_json))


def _faults(experiment: DictConfig) -> dict[str, FaultModel]:
    return _fault_models(_key(experiment["fleet"].get("faults")))


def inject(
    fault: Fault, report: RoundReport, arrays: ArrayRecord | None
) -> tuple[RoundReport, ArrayRecord | None]:
    """Apply this round's injected fault to a finished training (fedbench.devices.faults)."""
    if fault.slowdown > 1.0 and report.status == "ok":
        f = fault.slowdown
        report = replace(
            report,
            latency_s=report.latency_s * f,
            energy_j=report.energy_j * f,
            round_trip_s=report.round_trip_s + report.latency_s * (f - 1.0),
            reason=f"injected fault: {f:g}x slowdown",
        )
    if arrays is None or not fault.kind:
        return report, arrays
    if fault.kind == "crash":
        raise InjectedCrash(f"injected fault: {report.device} crashed during training")
    if fault.kind == "network_loss":
        return report.with_status("dropped", "injected fault: upload lost"), None
    state = arrays.to_torch_state_dict()
    name = next(k for k, v in state.items() if v.is_floating_point())
    if fault.kind == "nan_update":
        state[name] = torch.full_like(state[name], float("nan"))
    else:  # bad_update: a tensor of the wrong shape
        state[name] = torch.zeros(state[name].numel() + 1)
    return report, ArrayRecord(state)


def _train(
    experiment: DictConfig,
    task: TrainTask,
    device: DeviceSpec,
    meter: Meter,
    model: nn.Module,
    base: RoundReport,
) -> tuple[RoundReport, bool]:
    scenario = instantiate(experiment["scenario"])
    ctx = data_context(OmegaConf.to_container(experiment), len(fleet_of(experiment)))  # type: ignore[arg-type]
    data = scenario.device_data(ctx, task.device_index, task.day)
    t = experiment["train"]
    params = TrainParams(
        int(t.batch_size),
        int(t.local_epochs),
        float(t.lr),
        float(t.momentum),
        float(t.weight_decay),
        bool(t.get("bn_momentum_scaled", False)),
    )
    job = TrainJob(
        model_name=str(experiment["model"]["name"]),
        input_shape=tuple(int(v) for v in experiment["model"]["input_shape"]),
        batch_sizes=step_sizes(len(data), params.batch_size, params.local_epochs),
        model_bytes=sum(p.numel() * p.element_size() for p in model.state_dict().values()),
        now_s=task.now_s,
        state=task.state,
    )
    seed = int(experiment["seed"]) * 1_000_003 + task.round * 10_007 + task.device_index
    # The memory plan for the device's budget (fedbench.train.round_plan).
    rp = plan_round(model, job, meter, str(t.get("memory_planner", "auto")))
    torch.manual_seed(seed)
    loss, cost = meter.measure(
        model,
        rp.job,
        lambda: train_local(model, data, params, seed, plan=rp.job.plan, adapt=rp.adapt),
    )
    cost = rp.explain(cost)
    return _report(base, cost, len(data), loss), loss is not None and cost.status == "ok"


# The Cost fields that are RoundReport fields too (status, latency_s, energy_j, ...).
_COST_FIELDS = tuple(f.name for f in dataclasses.fields(Cost) if f.name in CSV_FIELDS)


def _report(base: RoundReport, cost: Cost, n: int, loss: float | None) -> RoundReport:
    comm = 0.0 if math.isnan(cost.comm_s) else cost.comm_s
    fields: dict[str, object] = {k: getattr(cost, k) for k in _COST_FIELDS}
    fields["round_trip_s"] = cost.latency_s + comm if not math.isnan(cost.latency_s) else comm
    fields["num_examples"] = n if cost.status == "ok" else 0
    fields["train_loss"] = math.nan if loss is None else loss
    return replace(base, **fields)  # type: ignore[arg-type]
