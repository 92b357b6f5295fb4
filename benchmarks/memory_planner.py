"""Memory planner on the host: measured peak memory and step time, full batch vs. the chosen plan.

For each model the planner (fedbench.train.planner, time ranked by its
FLOPs+bytes proxy: the host has no device profile) picks a plan for each
budget; then, on this host, for the full batch and for every chosen plan:

- the MEASURED peak: `measured_peak_memory`, the CPU allocator's record of
  one real training step (torch profiler memory events) - not the
  planner's prediction, which is shown next to it;
- the MEASURED step wall time: the real training path
  (fedbench.train.execute.PlanRunner, SGD with momentum), median over
  `--repeats` steps after a warm-up, full and planned steps interleaved so
  a loaded host slows both alike.

Reduction = full measured peak / plan measured peak; overhead = plan step
time / full step time. Targets (paper 004, Sage: >20x): >= 10x reduction
for DenseNet40 at batch 64 with <= 1.5x overhead at that reduction. The
budgets are 2 GB, 1 GB and 512 MB, plus for DenseNet40 the budgets at which
10x, 20x (the paper's figure) and 50x would be reached (its full measured
peak / factor). Batch sizes: DenseNet40 64
(3x32x32, the daily scenario), ResNet50 and MobileNetV2 16 (3x224x224).

    python benchmarks/memory_planner.py [threads=1] [repeats=3]
        [models=densenet40,resnet50,mobilenetv2] [out=FILE]
"""

from __future__ import annotations

import copy
import os
import statistics
import sys
import time
from dataclasses import dataclass

import torch
from torch import nn

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_words, script
from fedbench.core.plans import FULL, Plan
from fedbench.measure.peak import measured_peak_memory
from fedbench.models import build_model
from fedbench.train.execute import PlanRunner
from fedbench.train.planner import PlanChoice, choose_plan

MIB = 2**20
BATCH = {"densenet40": 64, "resnet50": 16, "mobilenetv2": 16}
BUDGETS_MB = (2048.0, 1024.0, 512.0)
TEN_X = "densenet40"  # the model whose 10x budget is searched (the paper's headline)
FACTORS = (10, 20, 50)  # reduction factors whose budgets (full measured peak / factor) are tried


@dataclass(frozen=True)
class Row:
    model: str
    batch: int
    budget: str
    choice: PlanChoice
    peak_mb: float
    full_peak_mb: float
    step_s: float
    full_step_s: float

    @property
    def reduction(self) -> float:
        return self.full_peak_mb / self.peak_mb

    @property
    def overhead(self) -> float:
        return self.step_s / self.full_step_s


def step_times(
    model: nn.Module, shape: tuple[int, ...], batch: int, plans: list[Plan], repeats: int
) -> dict[Plan, float]:
    """Median wall seconds of one optimizer step under each plan, interleaved."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, *shape, generator=gen)
    y = torch.randint(0, 10, (batch,), generator=gen)
    runs: dict[Plan, list[float]] = {p: [] for p in plans}
    copies = {p: copy.deepcopy(model) for p in plans}
    optims = {
        p: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, foreach=False)
        for p, m in copies.items()
    }
    runners = {p: PlanRunner(copies[p], optims[p], nn.CrossEntropyLoss()) for p in plans}
    for rep in range(repeats + 1):  # the first pass warms up (allocations, oneDNN)
        for plan in plans:
            start = time.perf_counter()
            runners[plan].step(x, y, plan, batch)
            if rep:
                runs[plan].append(time.perf_counter() - start)
    return {p: statistics.median(t) for p, t in runs.items()}


def bench_model(name: str, repeats: int, log: list[str]) -> list[Row]:
    model, shape = build_model(name)
    shape = tuple(shape)
    batch = BATCH[name]

    def peak(plan: Plan) -> float:
        return (
            measured_peak_memory(
                model,
                shape,
                batch,
                microbatches=plan.microbatches,
                checkpoint_segments=plan.checkpoint_segments,
            )
            / MIB
        )

    def choose(budget: float) -> PlanChoice:
        start = time.perf_counter()
        choice = choose_plan(model, shape, batch, budget, model_name=name)
        log.append(
            f"  {name} budget {budget:.0f} MB -> {choice.label} "
            f"({len(choice.tried)} plans measured, {time.perf_counter() - start:.0f} s)"
        )
        return choice

    full_peak = peak(FULL)
    budgets = [(f"{b:.0f}", b) for b in BUDGETS_MB]
    if name == TEN_X:
        budgets += [(f"{full_peak / k:.0f} ({k}x)", full_peak / k) for k in FACTORS]
    choices = [(label, choose(b)) for label, b in budgets]
    plans = list(dict.fromkeys([FULL] + [c.plan for _, c in choices if c.feasible]))
    peaks = {p: (full_peak if p == FULL else peak(p)) for p in plans}
    times = step_times(model, shape, batch, plans, repeats)
    return [
        Row(
            name,
            batch,
            label,
            c,
            peaks.get(c.plan, float("nan")),
            full_peak,
            times.get(c.plan, float("nan")),
            times[FULL],
        )
        for label, c in choices
    ]


def table(rows: list[Row]) -> str:
    head = (
        "model",
        "batch",
        "budget_MB",
        "plan",
        "pred_peak_MB",
        "meas_peak_MB",
        "full_peak_MB",
        "reduction",
        "step_s",
        "full_step_s",
        "overhead",
        "fits",
    )
    cells = [list(head)]
    for r in rows:
        fits = "yes" if r.peak_mb <= r.choice.budget_mb else "NO (measured)"
        if not r.choice.feasible:
            fits = "infeasible"
        cells.append(
            [
                r.model,
                str(r.batch),
                r.budget,
                r.choice.label,
                f"{r.choice.predicted_peak_mb:.1f}",
                f"{r.peak_mb:.1f}",
                f"{r.full_peak_mb:.1f}",
                f"{r.reduction:.2f}x",
                f"{r.step_s:.3f}",
                f"{r.full_step_s:.3f}",
                f"{r.overhead:.2f}x",
                fits,
            ]
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return "\n".join(
        "  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells
    )


def verdict(rows: list[Row]) -> str:
    tens = [r for r in rows if r.model == TEN_X and r.budget.endswith("(10x)")]
    if not tens:
        return ""
    r = tens[0]
    ok = r.reduction >= 10 and r.overhead <= 1.5
    return (
        f"{TEN_X} batch {r.batch}: {r.choice.label} at budget {r.choice.budget_mb:.0f} MB gives "
        f"{r.reduction:.1f}x less measured peak memory ({r.full_peak_mb:.0f} -> "
        f"{r.peak_mb:.1f} MB) at {r.overhead:.2f}x step time: target (>= 10x, <= 1.5x) "
        f"{'met' if ok else 'NOT met'}"
    )


GRAMMAR = Grammar(
    "python benchmarks/memory_planner.py",
    __doc__.splitlines()[0],
    (
        Key("threads", "torch intra-op threads", "1"),
        Key("repeats", "interleaved timed steps (the median is printed)", "3"),
        Key("models", "models, comma-separated, of " + ", ".join(BATCH), ",".join(BATCH)),
        Key("out", "also write the report to this file"),
    ),
    (
        "python benchmarks/memory_planner.py",
        "python benchmarks/memory_planner.py models=densenet40 repeats=1",
    ),
)


def main(argv: list[str] | None = None) -> int:
    return script(GRAMMAR, run, argv)


def run(o: dict[str, str]) -> int:
    threads, repeats = parse_int("threads", o["threads"], 1), parse_int("repeats", o["repeats"], 1)
    models = parse_words("models", o["models"], list(BATCH))
    torch.set_num_threads(threads)
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    log: list[str] = []
    rows = [row for name in models for row in bench_model(name, repeats, log)]
    report = "\n".join(
        [
            f"Memory planner on this host: torch {torch.__version__}, {threads} thread(s), "
            f"median of {repeats} interleaved steps; {os.cpu_count()} CPUs, load average "
            f"{load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end (a shared host: "
            "step times carry that noise, ratios less so)",
            table(rows),
            "",
            verdict(rows),
            "planner:",
            *log,
            f"wall {time.perf_counter() - start:.0f} s",
        ]
    )
    print(report)
    if o["out"]:
        with open(o["out"], "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
