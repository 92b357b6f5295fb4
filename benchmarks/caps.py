"""What a capped call costs: one device's call in a forked child against the same call in-process.

`runtime.enforce_caps=true` runs every emulated device's call in a child
process forked for it (fedbench.client.isolated), so that a call that runs
out of its memory cap ends with its process instead of breaking the worker.
This script measures what that costs per call, in one process, side by side:

- `bare`: the mechanism alone - fork, the device's limits (threads, CPUs, a
  memory cgroup or RLIMIT_AS), the model's weights sent back through the
  pipe as a reply carries them, the child's exit - around a call that only
  packs DenseNet40's weights (4 MB);
- per model: one device's round through fedbench's own ClientApp (data,
  plan, emulation, one optimizer step of the full batch), with
  `runtime.enforce_caps` off and on, each in a fresh worker-like process of
  its own (this script, `mode=`), so that the capped worker is as in a
  run: it never trains itself, and each child pays what a warm worker keeps
  between calls (the first step's kernel set-up, the model built, the
  device's data read).

Each side makes one warm-up call, then `repeats=` calls; medians are
reported. The device is a Raspberry Pi 4 (3.4 GB budget: every call fits),
one thread.

    python benchmarks/caps.py
    python benchmarks/caps.py models=small_cnn,densenet40 repeats=5
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from flwr.app import ArrayRecord, Context, RecordDict

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests.helpers: messages as the server sends

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_words, script  # noqa: E402
from fedbench.client.app import app  # noqa: E402
from fedbench.client.caps import limits_for  # noqa: E402
from fedbench.client.isolated import run_isolated  # noqa: E402
from fedbench.core.meter import Caps  # noqa: E402
from fedbench.experiment.compose import experiment_from, resolve  # noqa: E402
from fedbench.models import build_model  # noqa: E402
from tests.helpers import task_identity, train_message  # noqa: E402
from tests.test_compose import composed  # noqa: E402


def _experiment(model: str, caps: bool, batch: int) -> object:
    overrides = [
        "experiment=smoke",
        f"model={model}",
        "fleet.devices=[{profile:rpi4,count:1}]",
        "strategy.clients_per_round=1",
        f"train.batch_size={batch}",
        f"scenario.new_samples_per_day={batch}",
        f"runtime.enforce_caps={str(caps).lower()}",
    ]
    return experiment_from(resolve(composed(overrides)), overrides)


def _call(experiment: object, arrays: ArrayRecord) -> Callable[[], float]:
    def once() -> float:
        msg = train_message(experiment, 0, arrays)  # type: ignore[arg-type]
        context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
        start = time.perf_counter()
        app(msg, context)
        return time.perf_counter() - start

    return once


def _interleaved(calls: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    for call in calls.values():
        call()  # warm-up: caches, the workload measured once
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            times[name].append(call())
    return {name: statistics.median(ts) for name, ts in times.items()}


def bare(repeats: int) -> None:
    model, _ = build_model("densenet40")
    limits = limits_for(Caps(cores=1, memory_mb=3400.0), 1, 0)

    def weights() -> ArrayRecord:
        return ArrayRecord(model.state_dict())  # what a reply carries back

    def timed(call: Callable[[], object]) -> Callable[[], float]:
        def once() -> float:
            start = time.perf_counter()
            call()
            return time.perf_counter() - start

        return once

    med = _interleaved(
        {"in-process": timed(weights), "isolated": timed(lambda: run_isolated(weights, limits))},
        repeats,
    )
    mechanism = limits.describe_memory()
    print(f"bare call returning densenet40's weights as an ArrayRecord ({mechanism}):")
    inside, outside = med["in-process"] * 1e3, med["isolated"] * 1e3
    print(f"  in-process {inside:8.1f} ms   isolated {outside:8.1f} ms")


def rounds(models: list[str], batch: int, repeats: int) -> None:
    print(f"one device's round (rpi4, batch {batch}, one step), median of {repeats}:")
    print(f"  {'model':>12} {'in-process s':>13} {'isolated s':>11} {'extra s':>8} {'ratio':>6}")
    for name in models:
        med = {mode: _side(name, batch, repeats, mode) for mode in ("off", "on")}
        extra = med["on"] - med["off"]
        ratio = med["on"] / med["off"]
        print(f"  {name:>12} {med['off']:13.2f} {med['on']:11.2f} {extra:8.2f} {ratio:6.2f}")


def _side(model: str, batch: int, repeats: int, mode: str) -> float:
    """Median seconds per call of one side, measured in a process of its own."""
    argv = [sys.executable, __file__, f"models={model}", f"batch={batch}"]
    argv += [f"repeats={repeats}", f"mode={mode}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def side(model: str, batch: int, repeats: int, caps: bool) -> float:
    net, _ = build_model(model)
    once = _call(_experiment(model, caps, batch), ArrayRecord(net.state_dict()))
    once()  # warm-up: the workload measured once, caches filled
    return statistics.median(once() for _ in range(repeats))


GRAMMAR = Grammar(
    "python benchmarks/caps.py",
    __doc__.splitlines()[0],
    (
        Key("models", "models, comma-separated", "small_cnn,densenet40"),
        Key("batch", "batch size", "16"),
        Key("repeats", "timed calls per side (the median is printed)", "5"),
        Key("mode", "internal: off or on, one side of the first model in this process"),
    ),
    ("python benchmarks/caps.py", "python benchmarks/caps.py models=small_cnn repeats=3"),
)


def run(o: dict[str, str]) -> None:
    models = parse_words("models", o["models"])
    batch, repeats = parse_int("batch", o["batch"], 1), parse_int("repeats", o["repeats"], 1)
    mode = parse_words("mode", o["mode"], ("off", "on"))[0] if o["mode"] else None
    task_identity()
    torch.set_num_threads(1)
    if mode is not None:  # one side of a model's comparison, in this process
        print(side(models[0], batch, repeats, mode == "on"))
        return
    bare(repeats * 4)
    rounds(models, batch, repeats)


if __name__ == "__main__":
    sys.exit(script(GRAMMAR, run))
