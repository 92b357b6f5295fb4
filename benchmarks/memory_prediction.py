"""Memory prediction vs. measurement: the emulator's peak against the host's real one.

For each model and batch size, the predicted peak is `Workload.peak_bytes`
(parameters + gradients + optimizer state + saved activations + workspace +
batch), as the emulator predicts it from `measure_workload`; the measured
peak is `measured_peak_memory`: the CPU allocator's own record of one real
training step (torch profiler memory events), which also sees buffers
allocated inside kernels that the prediction cannot see. Target: within
15% on every row.

Batch sizes follow the published rows these models are calibrated on
(calibration/data/training_measurements.csv): LeNet on the Meizu at batch 1-32, MobileNetV2 and
ResNet18 at 224x224 up to batch 16 (Raspberry Pi 4 rows), DenseNet40 in the
daily scenario (64 new images a day). What the prediction misses is
kernel-internal scratch: oneDNN on x86 computes convolutions in a layout
blocked by 16 channels, so LeNet's 6-channel convolutions hold up to 2.7x
their output in hidden buffers; its error drifts past -15% from batch 64
(try `models=lenet batch_sizes=64,256`).

    python benchmarks/memory_prediction.py [threads=1] [microbatches=4]
        [checkpoint_segments=4] [models=lenet,...] [batch_sizes=64,...]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import torch

from fedbench.cli.grammar import (
    Grammar,
    Key,
    parse_float,
    parse_int,
    parse_ints,
    parse_words,
    script,
)
from fedbench.core.workload import Workload
from fedbench.measure.peak import measured_peak_memory
from fedbench.measure.workload import measure_workload
from fedbench.models import build_model, input_spec

MIB = 2**20


@dataclass(frozen=True)
class Case:
    model: str
    batch_sizes: tuple[int, ...]


CASES: tuple[Case, ...] = (
    Case("lenet", (16, 32)),
    Case("mobilenetv2", (4, 16)),
    Case("resnet18", (4, 16)),
    Case("densenet40", (16, 64)),
)


@dataclass(frozen=True)
class Row:
    model: str
    shape: tuple[int, ...]
    batch: int
    workload: Workload
    measured: int
    seconds: float

    @property
    def error(self) -> float:
        return (self.workload.peak_bytes - self.measured) / self.measured


def _plan_label(batch: int, microbatches: int, segments: int) -> str:
    if microbatches == 1 and not segments:
        return "full"
    return f"{microbatches}x{batch // microbatches}" + (f"+ckpt{segments}" if segments else "")


def measure(case: Case, batch: int, microbatches: int, segments: int) -> Row:
    model, shape = build_model(case.model)
    spec = input_spec(case.model)
    start = time.perf_counter()
    workload = measure_workload(
        model,
        shape,
        batch,
        model_name=case.model,
        plan=_plan_label(batch, microbatches, segments),
        microbatches=microbatches,
        checkpoint_segments=segments,
        input_dtype=spec.dtype,
        input_high=spec.high,
        cache=False,
    )
    seconds = time.perf_counter() - start
    measured = measured_peak_memory(
        model,
        shape,
        batch,
        microbatches=microbatches,
        checkpoint_segments=segments,
        input_dtype=spec.dtype,
        input_high=spec.high,
    )
    return Row(case.model, shape, batch, workload, measured, seconds)


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'model':<12} {'input':<11} {'batch':>5} {'predicted':>10} {'measured':>10} "
        f"{'error':>7} | {'params':>7} {'grads':>7} {'optim':>7} {'saved':>8} "
        f"{'workspace':>9} {'batch':>6} | {'measure':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        w = r.workload
        shape = "x".join(str(s) for s in r.shape)
        print(
            f"{r.model:<12} {shape:<11} {r.batch:>5} {w.peak_bytes / MIB:>8.1f}Mi "
            f"{r.measured / MIB:>8.1f}Mi {100 * r.error:>6.1f}% | "
            f"{w.param_bytes / MIB:>7.1f} {w.grad_bytes / MIB:>7.1f} "
            f"{w.optimizer_state_bytes / MIB:>7.1f} {w.saved_activation_bytes / MIB:>8.1f} "
            f"{w.workspace_bytes / MIB:>9.1f} {w.input_bytes / MIB:>6.1f} | {r.seconds:>6.1f}s"
        )


GRAMMAR = Grammar(
    "python benchmarks/memory_prediction.py",
    __doc__.splitlines()[0],
    (
        Key("threads", "torch intra-op threads", "1"),
        Key("bound", "allowed |error| (fraction)", "0.15"),
        Key(
            "models",
            "models, comma-separated (default: " + ", ".join(c.model for c in CASES) + ")",
        ),
        Key("batch_sizes", "batch sizes, comma-separated, for every model (default: each model's)"),
        Key("microbatches", "micro-batches per step", "1"),
        Key("checkpoint_segments", "checkpointed segments (0: none)", "0"),
    ),
    (
        "python benchmarks/memory_prediction.py",
        "python benchmarks/memory_prediction.py models=lenet batch_sizes=64,256",
    ),
)


def main(argv: list[str] | None = None) -> int:
    return script(GRAMMAR, run, argv)


def run(o: dict[str, str]) -> int:
    torch.set_num_threads(parse_int("threads", o["threads"], 1))
    bound = parse_float("bound", o["bound"], 0.0, 10.0)
    models = parse_words("models", o["models"]) if o["models"] else []
    sizes = parse_ints("batch_sizes", o["batch_sizes"], 1) if o["batch_sizes"] else []
    micro = parse_int("microbatches", o["microbatches"], 1)
    segments = parse_int("checkpoint_segments", o["checkpoint_segments"], 0)
    cases = [c for c in CASES if not models or c.model in models]
    cases += [Case(m, ()) for m in models if m not in {c.model for c in CASES}]
    rows = []
    for case in cases:
        for batch in sizes or case.batch_sizes:
            rows.append(measure(case, batch, micro, segments))
    print_table(rows)
    within = sum(abs(r.error) <= bound for r in rows)
    print(f"\nwithin {100 * bound:.0f}% of measured: {within}/{len(rows)} rows (MiB)")
    return 0 if within == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
