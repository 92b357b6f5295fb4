"""The training bench of `profile_device`: real timed steps on this device, under the probe.

For each (model or kernel probe, batch size) it runs the measured step of
fedbench.measure.step (a deep copy, steady-state optimizer) a few times to
warm up, then times `steps` steps one by one, in `rounds` rounds that
interleave the cases (a slow spell of the device then hits every case, not
one). A case's step time is the lower quartile of all its timed steps:
noise on a step time is one-sided - the OS, another process, a garbage
collection or a cache another core thrashed only ever make a step slower -
so a low quantile estimates the device's own speed better than the mean
(the reasoning behind `timeit`'s minimum), without trusting a single
lucky step. Each case is also measured by the probe (ProbeMeter: power,
temperature, clock), and the workload of the same step (FLOPs, bytes) is
measured once for the fit.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fedbench.core.meter import Cost, TrainJob
from fedbench.core.workload import Workload
from fedbench.devices.probe_meter import ProbeMeter
from fedbench.errors import FedbenchError
from fedbench.measure.step import (
    PreparedStep,
    StepObserver,
    StepSpec,
    isolated,
    prepare,
    run_step,
)
from fedbench.measure.workload import measure_workload
from fedbench.profiling.probes import build_probe, is_probe, probe_names

OPTIMIZER = "sgd_momentum"  # what the ClientApp's training loop uses


@dataclass(frozen=True)
class Case:
    model: str
    batch_size: int

    @classmethod
    def parse(cls, text: str) -> Case:
        """`lenet@32` or `lenet` (batch 32)."""
        name, _, batch = text.partition("@")
        if not name or (batch and not batch.isdigit()) or (batch and int(batch) < 1):
            raise FedbenchError(
                f"bench case {text!r}: expected MODEL or MODEL@BATCH, e.g. lenet@32"
            )
        return cls(name, int(batch) if batch else 32)

    def __str__(self) -> str:
        return f"{self.model}@{self.batch_size}"


@dataclass(frozen=True)
class Timing:
    case: Case
    step_s: float  # wall time per step (lower quartile of the timed steps)
    # CPU time of the stepping thread per step (lower quartile): with one torch
    # thread, the step as on a device nothing else uses, whatever this host runs.
    cpu_step_s: float
    steps: int
    spread: float  # (p90 - p10) / median of the wall step times
    threads: int
    workload: Workload
    cost: Cost  # the probe's figures over the case's last round


@dataclass
class _Runs:
    workload: Workload
    wall: list[float]
    cpu: list[float]
    cost: Cost | None = None


def _lower_quartile(values: Sequence[float]) -> float:
    return (
        statistics.quantiles(values, n=4, method="inclusive")[0] if len(values) > 1 else values[0]
    )


def _network(name: str) -> tuple[nn.Module, tuple[int, ...], torch.dtype, int | None]:
    """A zoo model or a kernel probe: the network, its input shape, dtype and id range."""
    from fedbench.models import build_model, model_names
    from fedbench.models.registry import input_spec

    if is_probe(name):
        model, shape = build_probe(name)
        return model, shape, torch.float32, None
    if name not in model_names():
        raise FedbenchError(
            f"model {name!r} is neither in the zoo nor a kernel probe; valid: "
            f"{model_names() + probe_names()}"
        )
    model, shape = build_model(name)
    spec = input_spec(name)  # token-id models take int64 inputs
    return model, tuple(shape), spec.dtype, spec.high


def _prepared(case: Case) -> tuple[PreparedStep, tuple[int, ...], Workload]:
    model, shape, dtype, high = _network(case.model)
    workload = measure_workload(
        model,
        shape,
        case.batch_size,
        model_name=case.model,
        optimizer=OPTIMIZER,
        input_dtype=dtype,
        input_high=high,
    )
    step = StepSpec(shape, case.batch_size, optimizer=OPTIMIZER, input_dtype=dtype, input_high=high)
    return prepare(model, step), shape, workload


def _time(
    step: PreparedStep,
    shape: tuple[int, ...],
    case: Case,
    steps: int,
    warmup: int,
    meter: ProbeMeter,
    runs: _Runs,
) -> None:
    observer = StepObserver()

    def train() -> float:
        with isolated():
            for _ in range(warmup):
                run_step(step, observer)
            for _ in range(steps):
                start, cpu = time.perf_counter(), time.thread_time()
                run_step(step, observer)
                runs.wall.append(time.perf_counter() - start)
                runs.cpu.append(time.thread_time() - cpu)
        return 0.0

    job = TrainJob(case.model, shape, (case.batch_size,) * steps, 0, 0.0, None)
    _, runs.cost = meter.measure(step.model, job, train)


def run_bench(cases: Sequence[Case], steps: int, warmup: int, rounds: int = 1) -> list[Timing]:
    """Time every case in `rounds` interleaved rounds of `steps` steps (module doc)."""
    if steps < 1 or rounds < 1:
        raise FedbenchError(f"steps={steps} and rounds={rounds} must be >= 1")
    meter = ProbeMeter()
    prepared = {c: _prepared(c) for c in dict.fromkeys(cases)}
    runs = {c: _Runs(w, [], []) for c, (_, _, w) in prepared.items()}
    for _ in range(rounds):
        for case, (step, shape, _) in prepared.items():
            _time(step, shape, case, steps, warmup, meter, runs[case])
    out = []
    for case, r in runs.items():
        deciles = statistics.quantiles(r.wall, n=10) if len(r.wall) > 1 else [r.wall[0]] * 9
        median = statistics.median(r.wall)
        assert r.cost is not None
        out.append(
            Timing(
                case,
                _lower_quartile(r.wall),
                _lower_quartile(r.cpu),
                len(r.wall),
                (deciles[-1] - deciles[0]) / median,
                torch.get_num_threads(),
                r.workload,
                r.cost,
            )
        )
    return out
