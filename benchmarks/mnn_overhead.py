"""MNN's host-side cost per training step and per call, measured with MNN itself.

The MNN calibration rows (the Meizu 16T and Xiaomi Mi 9) leave two of MNN's
host-side constants barely identified: its fixed cost per step
(`cpu.mnn.step_overhead_mcycles`) shows only in LeNet's millisecond steps, so a
fit without LeNet falls back to that constant's prior centre. This script
measures the prior centres on this host, with MNN's own training code (its
Python package, `pip install MNN`; not a fedbench dependency):

- the model: chains of n `Linear(4, 4)` layers (n = 1 ... 8) and a softmax,
  batch 1, cross-entropy against a one-hot target, SGD with momentum and
  weight decay - the MNN benchmark's optimizer - so the kernels cost nothing
  and a step is MNN's per-step and per-call work;
- the timed region: `sgd.step(loss)` alone, as the MNN benchmark times it
  (tools/train/source/demo/MnistBenchmarkUtils.cpp in
  UbiquitousLearning/Benchmark-On-Device-Training): building the backward graph,
  running forward, backward and update, wall time: the median of `steps`,
  the fastest of `rounds` such medians;
- the calls: fedbench's own lowering of the same chain for MNN
  (`fedbench.devices.lowering`) - a fixed set for the softmax and loss and the
  same number per layer - so a least-squares line t = a + b n gives the cost
  per call, b / (calls per layer), and the fixed cost per step, a minus the
  fixed calls at that cost. Cycles are at the host's nominal clock;
- the growth: longer chains (`long`, up to 256 layers, 3,076 calls) cost more
  per call than short ones - MNN's host work per call grows with the step's
  graph. Each long chain's step less the fixed cost per step, over its calls,
  is its cost per call; a line through those against the calls N gives
  c0 (1 + N / N0): the cost per call of a tiny graph and the graph size N0 at
  which it has doubled. The MNN calibration models span 54 (LeNet) to 2,836
  (MobileNetV2) calls per step.

Writes benchmarks/results/mnn_overhead.txt. Timing figures: run on a quiet host.

    python benchmarks/mnn_overhead.py [threads=1,2] [lengths=1,2,3,4,6,8] [long=16,32,64,128,256]
"""

from __future__ import annotations

import datetime as dt
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import nn

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_ints, script
from fedbench.devices.kernels import FORWARD, OPTIMIZER
from fedbench.devices.lowering import lower_workload
from fedbench.errors import FedbenchError
from fedbench.measure.workload import measure_workload
from fedbench.profiling.describe import describe

RESULTS = Path(__file__).resolve().parent / "results"
WIDTH = 4  # features per layer: a 4 x 4 GEMM is a few hundred cycles


class _TorchChain(nn.Module):
    """The chain as PyTorch builds it, for fedbench's call table (the step's
    cross-entropy is the softmax and loss of MNN's chain)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@dataclass(frozen=True)
class Calls:
    """MNN calls of a chain of n layers: `fixed + per_layer x n` (forward, backward, update)."""

    fixed: tuple[int, int, int]
    per_layer: tuple[int, int, int]


def chain_calls(lengths: Sequence[int]) -> Calls:
    """Fedbench's MNN lowering of the chains: the calls must be linear in n."""
    counts = {}
    for n in lengths:
        w = measure_workload(
            _TorchChain(n), (WIDTH,), 1, model_name=f"chain{n}", optimizer="sgd_momentum_wd"
        )
        table = lower_workload(w, "mnn")
        counts[n] = tuple(int((table.phase == p).sum()) for p in range(FORWARD, OPTIMIZER + 1))
    lo, hi = min(lengths), max(lengths)
    per = tuple((counts[hi][i] - counts[lo][i]) // (hi - lo) for i in range(3))
    fixed = tuple(counts[lo][i] - per[i] * lo for i in range(3))
    for n, c in counts.items():
        assert c == tuple(f + p * n for f, p in zip(fixed, per, strict=True)), (n, c)
    return Calls(fixed, per)  # type: ignore[arg-type]


def _mnn() -> ModuleType:
    try:
        import MNN  # type: ignore[import-not-found]
    except ImportError:
        raise FedbenchError(
            "needs MNN's Python package, which fedbench does not install: pip install MNN"
        ) from None
    return MNN  # type: ignore[no-any-return]


def _chain(mnn: ModuleType, n: int) -> Any:
    nn_, expr = mnn.nn, mnn.expr

    class Chain(nn_.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            for i in range(n):  # attributes: MNN's Module registers them as parameters
                setattr(self, f"l{i}", nn_.linear(WIDTH, WIDTH))

        def forward(self, x: Any) -> Any:
            for i in range(n):
                x = getattr(self, f"l{i}").forward(x)
            return expr.softmax(x, 1)

    return Chain()


def step_seconds(
    mnn: ModuleType, lengths: Sequence[int], steps: int, warmup: int, rounds: int
) -> list[float]:
    """Wall time of `sgd.step(loss)` per chain length: the fastest round's median. The
    lengths take turns within each round, so a host's slow spell slows them alike."""
    best = [float("inf")] * len(lengths)
    for _ in range(rounds):
        for i, n in enumerate(lengths):
            best[i] = min(best[i], _round(mnn, n, steps, warmup))
    return best


def _round(mnn: ModuleType, n: int, steps: int, warmup: int) -> float:
    """Median wall time of `sgd.step(loss)` over `steps` steps of a fresh chain of n layers."""
    expr = mnn.expr
    model = _chain(mnn, n)
    model.train(True)
    sgd = mnn.optim.SGD(model, 0.01, 0.9, 0.0005)
    rng = np.random.default_rng(n)
    times = []
    for i in range(warmup + steps):
        x = expr.const(rng.random((1, WIDTH), dtype=np.float32), [1, WIDTH], expr.NCHW)
        label = expr.const(np.array([i % WIDTH], np.int32), [1], expr.NCHW, expr.int)
        target = expr.one_hot(label, WIDTH, 1.0, 0.0)
        loss = mnn.nn.loss.cross_entropy(model.forward(x), target)
        start = time.perf_counter()
        if not sgd.step(loss):
            raise SystemExit("MNN's sgd.step returned False: the step did not run")
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


def line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares intercept and slope."""
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def growth(calls: Sequence[int], ms: Sequence[float], overhead_ms: float) -> tuple[float, float]:
    """c0 and N0 of a cost per call c0 (1 + N / N0): the line through each chain's
    (step - overhead) / calls against its calls."""
    per_call = [(m - overhead_ms) / n for n, m in zip(calls, ms, strict=True)]
    c0, slope = line([float(n) for n in calls], per_call)
    if c0 <= 0.0 or slope <= 0.0:
        raise FedbenchError(
            f"the cost per call does not grow with the graph here ({c0 * 1e3:.1f} us + "
            f"{slope * 1e6:.3f} ns x calls): run on a quiet host"
        )
    return c0, c0 / slope


GRAMMAR = Grammar(
    "python benchmarks/mnn_overhead.py",
    __doc__.splitlines()[0],
    (
        Key("threads", "MNN threads, comma-separated (one line each)", "1,2"),
        Key("lengths", "chain lengths (layers), comma-separated", "1,2,3,4,6,8"),
        Key(
            "long",
            "longer chains for the growth per call, comma-separated ('' for none)",
            "16,32,64,128,256",
        ),
        Key("steps", "timed steps per chain and round (the median is kept)", "60"),
        Key("rounds", "rounds over the chains (the fastest median is kept)", "7"),
        Key("warmup", "untimed steps first, every round", "5"),
    ),
    ("python benchmarks/mnn_overhead.py", "python benchmarks/mnn_overhead.py threads=1"),
)


def main(argv: list[str] | None = None) -> int:
    return script(GRAMMAR, run, argv)


def run(o: dict[str, str]) -> int:
    threads = parse_ints("threads", o["threads"], 1)
    lengths = sorted(set(parse_ints("lengths", o["lengths"], 1)))
    if len(lengths) < 2:
        raise FedbenchError(f"lengths={o['lengths']}: give two chain lengths or more, e.g. 1,8")
    long = sorted(set(parse_ints("long", o["long"], 1))) if o["long"].strip() else []
    if long and (len(long) < 2 or long[0] <= lengths[-1]):
        raise FedbenchError(
            f"long={o['long']}: give two chain lengths or more, all longer than "
            f"lengths' longest ({lengths[-1]}), e.g. 16,256; or long='' for none"
        )
    steps, warmup = parse_int("steps", o["steps"], 1), parse_int("warmup", o["warmup"], 0)
    rounds = parse_int("rounds", o["rounds"], 1)
    mnn = _mnn()
    mnn.expr.lazy_eval(True)  # the training API builds and runs the step's graph lazily
    calls = chain_calls(lengths + long)
    per_layer, fixed = sum(calls.per_layer), sum(calls.fixed)
    desc = describe()
    ghz = next((c.max_freq_ghz for c in desc.clusters if c.max_freq_ghz), None)
    if ghz is None:
        raise FedbenchError("this host reports no CPU clock (/proc/cpuinfo): no cycles to give")
    lines = [
        f"MNN {mnn.version()}; fedbench's MNN calls per chain of n layers: "
        f"{fixed} + {per_layer} n (forward {calls.fixed[0]} + {calls.per_layer[0]} n, "
        f"backward {calls.fixed[1]} + {calls.per_layer[1]} n, "
        f"update {calls.fixed[2]} + {calls.per_layer[2]} n); cycles at {ghz:.2f} GHz",
    ]
    for t in threads:
        mnn.expr.set_thread_number(t)
        timed = [1e3 * s for s in step_seconds(mnn, lengths + long, steps, warmup, rounds)]
        ms, long_ms = timed[: len(lengths)], timed[len(lengths) :]
        a, b = line(lengths, ms)
        per_call_ms = b / per_layer
        overhead_ms = a - fixed * per_call_ms
        lines += [
            "",
            f"threads={t}: step ms by chain length "
            + ", ".join(f"{n}: {m:.3f}" for n, m in zip(lengths, ms, strict=True)),
            f"  fit t = {a:.3f} ms + {b:.4f} ms x n (max residual "
            f"{max(abs(m - a - b * n) for n, m in zip(lengths, ms, strict=True)):.3f} ms)",
            f"  per call {1e3 * per_call_ms:.1f} us = {per_call_ms * ghz * 1e3:.1f} kcycles; "
            f"per step {overhead_ms:.3f} ms = {overhead_ms * ghz:.2f} Mcycles",
        ]
        if long:
            n_calls = [fixed + per_layer * n for n in long]
            c0_ms, half = growth(n_calls, long_ms, overhead_ms)
            lines += [
                "  longer chains: step ms "
                + ", ".join(f"{n}: {m:.2f}" for n, m in zip(long, long_ms, strict=True))
                + "; per call us by calls "
                + ", ".join(
                    f"{c}: {1e3 * (m - overhead_ms) / c:.1f}"
                    for c, m in zip(n_calls, long_ms, strict=True)
                ),
                f"  growth: per call {1e3 * c0_ms:.1f} us = {c0_ms * ghz * 1e3:.1f} kcycles "
                f"x (1 + N / {half:.0f}) at N calls per step",
            ]
    date = dt.date.today().isoformat()
    header = (
        f"# python benchmarks/mnn_overhead.py   ({date}, {socket.gethostname()}, "
        f"{desc.summary()}; wall time of sgd.step, fastest of {rounds} medians of {steps})"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mnn_overhead.txt").write_text("\n".join([header, *lines]) + "\n")
    print("\n".join([header, *lines]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
