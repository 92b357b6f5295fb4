"""How well `profile_device` predicts models it was not fitted on, on this host.

Times real training steps of a set of zoo models and of the kernel probes
on this host (one torch thread, the stepping thread's CPU time, so a shared
host still measures its own speed; `fedbench.profiling.bench`), then
refits the profile the way `python -m fedbench.profile_device` does (the
kernel ratios, per-call cost, bandwidth, cache, arch and framework;
`fedbench.profiling.fit`):

- leave one model out: for each zoo model, fit on the probes and every
  other model's cases and predict that model's cases (issue target: MAPE
  at most 15%);
- half and half: fit on the probes and every other model (in the order
  below), predict the rest, and the other way round;
- without probes: leave one model out fitted on the models alone, to show
  what the probes buy.

The probes (fedbench.profiling.probes) are synthetic one-kernel networks,
never zoo models, so every fold still predicts a network it never saw.

Writes benchmarks/results/profile_device.txt (the tables) and
benchmarks/results/profile_device_lomo.csv (one row per held-out case,
which calibration/report.md includes). Timing figures: run on a quiet host.

    python benchmarks/profile_device.py [models=lenet,dqn,...] [batches=4,16]
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_ints, parse_words, script
from fedbench.profiling import template
from fedbench.profiling.bench import Case, run_bench
from fedbench.profiling.describe import describe
from fedbench.profiling.fit import Fit, Sample, fit_profile, predict
from fedbench.profiling.probes import probe_cases

RESULTS = Path(__file__).resolve().parent / "results"
# Small and mid-size zoo models of every kind the emulator distinguishes:
# plain and 1x1/k x k/strided convolutions, depthwise-separable, dense
# concatenation, fully connected, LSTM, GAN, at batches a 1-thread step
# finishes in well under a second.
MODELS = (
    "lenet",
    "small_cnn",
    "dqn",
    "dcgan",
    "char_cnn_lstm",
    "reduced_mobilenet",
    "dwconv_only",
    "fc_only",
    "conv_only",
    "densenet40",
    "squeezenet1_1",
    "mobilenetv3_small",
)
BATCHES = (4, 16)


def _measured_base(threads: int, cases: int) -> dict[str, object]:
    nan = math.nan
    m = template.Measured(
        description=describe(),
        name="this_host",
        kind="sbc",
        threads=threads,
        runtime_rss_mb=0.0,
        idle_w=nan,
        bench_w=nan,
        idle_temp_c=nan,
        bench_temp_c=nan,
        critical_c=nan,
        battery_wh=None,
        clock="cpu",
        cases=cases,
    )
    return template.base_profile(m)


def _fit(base: dict[str, object], samples: Sequence[Sample], archs: list[str] | None) -> Fit:
    return fit_profile(base, samples, archs=archs)


def _model(s: Sample) -> str:
    return s.name.split("@")[0]


def _leave_one_model_out(
    base: dict[str, object],
    samples: Sequence[Sample],
    probes: Sequence[Sample],
    models: Sequence[str],
    archs: list[str] | None,
) -> list[tuple[str, float, float, float]]:
    out: list[tuple[str, float, float, float]] = []
    for model in models:
        held = [s for s in samples if _model(s) == model]
        fit = _fit(base, [s for s in samples if s not in held] + list(probes), archs)
        out += _rows(fit, held)
    return out


def _rows(fit: Fit, held: Sequence[Sample]) -> list[tuple[str, float, float, float]]:
    out = []
    for s in held:
        p = predict(fit.profile, s.workload)
        out.append((s.name, s.seconds, p, 100.0 * (p / s.seconds - 1.0)))
    return out


def _mape(rows: Sequence[tuple[str, float, float, float]]) -> float:
    return sum(abs(r[3]) for r in rows) / len(rows)


def _table(title: str, rows: Sequence[tuple[str, float, float, float]]) -> list[str]:
    lines = [title, f"{'case':<24} {'measured ms':>12} {'predicted ms':>13} {'error':>8}"]
    lines += [f"{n:<24} {1e3 * m:>12.3f} {1e3 * p:>13.3f} {e:>+7.1f}%" for n, m, p, e in rows]
    lines.append(f"MAPE {_mape(rows):.1f}% over {len(rows)} cases")
    return lines


GRAMMAR = Grammar(
    "python benchmarks/profile_device.py",
    __doc__.splitlines()[0],
    (
        Key("models", "zoo models, comma-separated", ",".join(MODELS)),
        Key("batches", "batch sizes, comma-separated", ",".join(map(str, BATCHES))),
        Key("steps", "timed steps per case and round", "5"),
        Key("rounds", "rounds over every case (the median is kept)", "3"),
    ),
    (
        "python benchmarks/profile_device.py",
        "python benchmarks/profile_device.py models=lenet,dqn batches=4,16",
    ),
)


def main(argv: list[str] | None = None) -> int:
    return script(GRAMMAR, run, argv)


def run(o: dict[str, str]) -> int:
    torch.set_num_threads(1)
    models = parse_words("models", o["models"])
    batches = parse_ints("batches", o["batches"], 1)
    steps, rounds = parse_int("steps", o["steps"], 1), parse_int("rounds", o["rounds"], 1)
    cases = [Case(m, b) for m in models for b in batches]
    cases += [Case.parse(c) for c in probe_cases()]
    timings = run_bench(cases, steps, warmup=2, rounds=rounds)
    everything_timed = [Sample(str(t.case), t.workload, t.cpu_step_s) for t in timings]
    samples = [s for s in everything_timed if _model(s) in models]
    probes = [s for s in everything_timed if _model(s) not in models]
    desc = describe()
    archs = [c.arch for c in desc.clusters if c.arch][:1] or None
    base = _measured_base(1, sum(t.steps for t in timings))

    lines: list[str] = []
    everything = _fit(base, samples + probes, archs)
    lines += _table(
        f"fit on every case (in-sample): arch {everything.arch}, framework "
        f"{everything.framework}, {everything.describe()}"
        + (f" ({', '.join(everything.at_bound)})" if everything.at_bound else ""),
        _rows(everything, samples + probes),
    )
    lomo = _leave_one_model_out(base, samples, probes, models, archs)
    lines += ["", *_table("leave one model out (each model predicted by a fit without it)", lomo)]
    halves = (models[0::2], models[1::2])
    split: list[tuple[str, float, float, float]] = []
    for fit_on, predict_on in (halves, halves[::-1]):
        fit = _fit(base, [s for s in samples if _model(s) in fit_on] + probes, archs)
        split += _rows(fit, [s for s in samples if _model(s) in predict_on])
    title = "half and half (fit on the probes and one half of the models, predict the other)"
    lines += ["", *_table(title, split)]
    bare = _leave_one_model_out(base, samples, [], models, archs)
    lines += ["", *_table("leave one model out without the kernel probes", bare)]

    date = dt.date.today().isoformat()
    host = f"{socket.gethostname()}, {desc.summary()}"
    header = f"# python benchmarks/profile_device.py   ({date}, {host}; 1 thread, CPU time)"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "profile_device.txt").write_text("\n".join([header, *lines]) + "\n")
    with (RESULTS / "profile_device_lomo.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["case", "measured_ms", "predicted_ms", "error_pct", "date", "host"])
        for name, m, p, e in lomo:
            writer.writerow([name, f"{1e3 * m:.3f}", f"{1e3 * p:.3f}", f"{e:+.1f}", date, host])
    print("\n".join([header, *lines]))
    verdict = "within" if _mape(lomo) <= 15.0 else "over"
    print(f"\nleave-one-model-out MAPE {_mape(lomo):.1f}%: {verdict} the 15% target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
