"""Batched training across devices (torch.func.vmap) against one device after another.

fedbench's worker trains a group of devices in one vmapped pass only where
`fedbench.train.batched.batching_pays` measures it faster (issue 13's
"used automatically where it is faster, measured, never silently"). This
script shows, per model, what that measurement sees on this host: the
seconds to train N devices' local epochs one after another
(`train_local`) and all at once (`train_batched`), in one process, one
thread (as a worker trains), interleaved and repeated, median reported.

The `used` column is the worker's own decision (`batching_pays`: one step
per side, best of up to three tries, batching must win by 10%), so near a
tie it may differ from this table's medians over whole epochs.

Batching pays where a step is dispatch-bound (many small operators, little
arithmetic each); where the activations of N devices no longer fit the cache
it loses, because one device at a time keeps its activations cache-resident.

The `ceiling` column bounds what any batching across devices could give on
this host: one model trained on all N devices' samples at N times the batch
(the same arithmetic in the fewest operators, one set of weights in cache),
as a speed-up over one device after another. Where it is near 1x the step is
compute-bound already and no batched path, vmap or hand-written, can do
much better.

    python benchmarks/batched.py
    python benchmarks/batched.py models=lenet,small_cnn devices=10,50
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace

import torch

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_ints, parse_words, script
from fedbench.data.source import Tensors
from fedbench.models import build_model
from fedbench.train.batched import batchable, batching_pays, train_batched
from fedbench.train.loop import TrainParams, train_local


def seconds(models: list[str], devices: int, samples: int, batch: int, repeats: int) -> None:
    params = TrainParams(batch_size=batch, local_epochs=1, lr=0.05, momentum=0.0, weight_decay=0.0)
    header = ("model", "input", "sequential s", "vmapped s", "speed-up", "ceiling")
    print("{:>12} {:>12} {:>13} {:>10} {:>9} {:>8}  used".format(*header))
    for name in models:
        model, shape = build_model(name)
        gen = torch.Generator().manual_seed(0)
        datas = [
            Tensors(torch.randn(samples, *shape, generator=gen), torch.randint(0, 10, (samples,)))
            for _ in range(devices)
        ]
        if not batchable(model, datas, params):
            why = "not batchable (dropout or optimizer)"
            print(f"{name:>12} {'x'.join(map(str, shape)):>12}  {why}")
            continue
        state = {k: v.clone() for k, v in model.state_dict().items()}
        train_batched(model, datas, params, range(devices))  # vmap's first call compiles
        pooled = Tensors(torch.cat([d.x for d in datas]), torch.cat([d.y for d in datas]))
        wide = replace(params, batch_size=batch * devices)
        seq, bat, one = [], [], []
        for _ in range(repeats):  # interleaved, so host noise falls on all alike
            started = time.perf_counter()
            for i, data in enumerate(datas):
                model.load_state_dict(state)
                train_local(model, data, params, seed=i)
            seq.append(time.perf_counter() - started)
            model.load_state_dict(state)
            started = time.perf_counter()
            train_batched(model, datas, params, range(devices))
            bat.append(time.perf_counter() - started)
            model.load_state_dict(state)
            started = time.perf_counter()
            train_local(model, pooled, wide, seed=0)
            one.append(time.perf_counter() - started)
        model.load_state_dict(state)
        s, b, c = statistics.median(seq), statistics.median(bat), statistics.median(one)
        used = "yes" if batching_pays(model, datas, params) else "no"
        print(
            f"{name:>12} {'x'.join(map(str, shape)):>12} {s:13.3f} {b:10.3f} {s / b:8.2f}x "
            f"{s / c:7.2f}x  {used}",
            flush=True,
        )


GRAMMAR = Grammar(
    "python benchmarks/batched.py",
    __doc__.splitlines()[0],
    (
        Key("models", "models, comma-separated", "lenet,small_cnn,fc_only,dqn"),
        Key("devices", "device counts, comma-separated", "10,50"),
        Key("samples", "samples per device", "32"),
        Key("batch", "batch size", "16"),
        Key("repeats", "timed repetitions (the median is printed)", "3"),
    ),
    ("python benchmarks/batched.py", "python benchmarks/batched.py models=lenet devices=10"),
)


def run(o: dict[str, str]) -> None:
    models = parse_words("models", o["models"])
    samples, batch = parse_int("samples", o["samples"], 1), parse_int("batch", o["batch"], 1)
    repeats = parse_int("repeats", o["repeats"], 1)
    devices = parse_ints("devices", o["devices"], 1)
    torch.set_num_threads(1)
    print(
        f"# torch {torch.__version__}, 1 thread, {os.cpu_count()} CPUs; {samples} samples "
        f"per device, batch {batch}, one local epoch, median of {repeats}"
    )
    for n in devices:
        print(f"\n{n} devices")
        seconds(models, n, samples, batch, repeats)


if __name__ == "__main__":
    sys.exit(script(GRAMMAR, run))
