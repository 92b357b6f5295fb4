"""`python -m fedbench.profile_device`: profile the device this runs on.

    python -m fedbench.profile_device out=fedbench/device_profiles/my_pi.yaml
    python -m fedbench.profile_device models=lenet,small_cnn batches=8,16,64 \\
        holdout=lenet@32,small_cnn@32

Runs the training bench (real timed steps of zoo models and of the kernel
probes, fedbench.profiling.probes, under the probe meter;
fedbench.profiling.bench), fits the profile's free constants to the step
times (fedbench.profiling.fit: this device's kernels relative to the fitted
framework constants, its per-call cost, memory bandwidth and cache, arch
and framework), measures the rest it can (cores, clocks,
memory budget, idle power and temperature where sensors exist) and writes a
device profile YAML that `fedbench.devices.profile.load_profile(path)`
loads; every number cites how it was obtained. Cases given with
`holdout=` are measured but not fitted: the table printed at the end shows
how well the profile predicts them (the emulator's step time vs the
measured one).

With one torch thread (`threads=1`) step times are the stepping thread's
CPU time, so a host shared with other work still yields the device's own
speed; with more threads they are wall times and the device should be idle.
"""

from __future__ import annotations

import math
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import yaml

from fedbench.cli.grammar import Grammar, Key, parse_float, parse_int
from fedbench.errors import FedbenchError

DEFAULT_MODELS = "lenet,small_cnn"
DEFAULT_BATCHES = "8,16,32,64"


GRAMMAR = Grammar(
    prog="python -m fedbench.profile_device",
    summary="Profile the device this runs on: timed training steps, fitted into a profile YAML.",
    keys=(
        Key("out", "profile YAML to write (unset: ./<name>.yaml)"),
        Key("name", "profile name, the file's stem (unset: the host name)"),
        Key("models", "zoo models to bench, comma-separated", DEFAULT_MODELS),
        Key("batches", "batch sizes, comma-separated", DEFAULT_BATCHES),
        Key("holdout", "MODEL@BATCH cases measured but not fitted, comma-separated", ""),
        Key("probes", "kernel probes to bench too: all, none, or names like conv3x3,norm", "all"),
        Key("steps", "timed steps per case and round", "7"),
        Key("rounds", "interleaved rounds over the cases", "3"),
        Key("threads", "torch threads (unset: all cores)"),
        Key("clock", "cpu or wall (unset: cpu with 1 thread, else wall)"),
        Key("kind", "sbc, phone or jetson (unset: guessed)"),
        Key("idle_s", "seconds of idle power and temperature", "3.0"),
    ),
    examples=(
        "python -m fedbench.profile_device out=fedbench/device_profiles/my_pi.yaml",
        "python -m fedbench.profile_device models=lenet,small_cnn batches=8,16,64 "
        "holdout=lenet@32,small_cnn@32 threads=1",
    ),
)


@dataclass(frozen=True)
class Options:
    """The parsed arguments."""

    out: Path | None
    name: str | None
    models: str
    batches: str
    holdout: str
    probes: str
    steps: int
    rounds: int
    threads: int | None
    clock: str | None
    kind: str | None
    idle_s: float


def parse(argv: Sequence[str]) -> Options:
    args = GRAMMAR.parse(argv)
    for key, valid in (("clock", ("cpu", "wall")), ("kind", ("sbc", "phone", "jetson"))):
        if key in args and args[key] not in valid:
            raise FedbenchError(f"{key}={args[key]!r}: valid: {', '.join(valid)}")
    threads = args.get("threads")
    return Options(
        out=Path(args["out"]) if "out" in args else None,
        name=args.get("name"),
        models=args.get("models", DEFAULT_MODELS) or DEFAULT_MODELS,
        batches=args.get("batches", DEFAULT_BATCHES) or DEFAULT_BATCHES,
        holdout=args.get("holdout", "") or "",
        probes=args.get("probes", "all") or "all",
        steps=parse_int("steps", args.get("steps", "7") or "7", 1),
        rounds=parse_int("rounds", args.get("rounds", "3") or "3", 1),
        threads=None if threads is None else parse_int("threads", threads, 1),
        clock=args.get("clock"),
        kind=args.get("kind"),
        idle_s=parse_float("idle_s", args.get("idle_s", "3.0") or "3.0", 0.0),
    )


def _name(text: str) -> str:
    clean = "".join(c if c.isalnum() or c in "-_" else "_" for c in text.lower())
    return clean.strip("_") or "device"


def _probe_cases(probes: str) -> list[str]:
    from fedbench.profiling.probes import probe_cases

    if probes == "none":
        return []
    if probes == "all":
        return probe_cases()
    try:
        return probe_cases([p.strip() for p in probes.split(",") if p.strip()])
    except FedbenchError as e:
        raise FedbenchError(f"probes={probes!r}: {e} (or all, none)") from None


def _cases(models: str, batches: str, holdout: str, probes: str) -> tuple[list[str], set[str]]:
    from fedbench.profiling.bench import Case

    try:
        sizes = [int(b) for b in batches.split(",") if b.strip()]
    except ValueError:
        raise FedbenchError(f"batches={batches!r}: expected integers like 8,16,64") from None
    fit = [f"{m.strip()}@{b}" for m in models.split(",") if m.strip() for b in sizes]
    fit += _probe_cases(probes)
    held = [str(Case.parse(c.strip())) for c in holdout.split(",") if c.strip()]
    fit = [c for c in fit if c not in held]
    if not fit:
        raise FedbenchError("nothing to fit: every case is held out")
    return fit + held, set(held)


def _idle(seconds: float) -> tuple[float, float]:
    """Average power and hottest temperature while idle (NaN without sensors)."""
    from fedbench.measure.probe import Probe

    probe = Probe(0.05)
    trace = probe.start()
    time.sleep(seconds)
    probe.stop()
    return trace.avg_power_w(), trace.temp_end()


def run(argv: Sequence[str]) -> str:
    args = parse(argv)
    import torch

    from fedbench.devices.profile import load_profile
    from fedbench.profiling import fit, template
    from fedbench.profiling.bench import Case, run_bench
    from fedbench.profiling.describe import describe

    desc = describe()
    out: Path = args.out or Path(f"{_name(args.name or socket.gethostname())}.yaml")
    name = args.name or out.stem
    if out.stem != name:
        raise FedbenchError(f"name={name!r} must be the file's stem ({out.stem!r})")
    threads = args.threads or desc.total_cores
    if not 1 <= threads <= desc.total_cores:
        raise FedbenchError(f"threads={threads}: this device has {desc.total_cores} cores")
    torch.set_num_threads(threads)
    clock = args.clock or ("cpu" if threads == 1 else "wall")
    names, held = _cases(args.models, args.batches, args.holdout, args.probes)
    cases = [Case.parse(c) for c in names]
    idle_w, idle_c = _idle(args.idle_s)
    rss_mb = psutil.Process().memory_info().rss / 2**20
    timings = run_bench(cases, args.steps, warmup=2, rounds=args.rounds)
    samples = [
        fit.Sample(str(t.case), t.workload, t.cpu_step_s if clock == "cpu" else t.step_s)
        for t in timings
    ]
    bench_w = _mean([t.cost.avg_power_w for t in timings])
    bench_c = max(
        (t.cost.temp_c_end for t in timings if not math.isnan(t.cost.temp_c_end)), default=math.nan
    )
    measured = template.Measured(
        description=desc,
        name=name,
        kind=args.kind or template.guess_kind(),
        threads=threads,
        runtime_rss_mb=rss_mb,
        idle_w=idle_w,
        bench_w=bench_w,
        idle_temp_c=idle_c,
        bench_temp_c=bench_c,
        critical_c=template.critical_temp_c(),
        battery_wh=template.battery_wh(),
        clock=clock,
        cases=sum(t.steps for t in timings if str(t.case) not in held),
    )
    base = template.base_profile(measured)
    nominal = {k: float(c["nominal_ghz"]) for k, c in base["clusters"].items()}
    known = [c.arch for c in desc.clusters if c.arch]
    result = fit.fit_profile(
        base, [s for s in samples if s.name not in held], archs=known[:1] or None
    )
    data = fit.with_params(base, result.arch, result.framework, result.values, digits=4)
    data["sources"] = template.sources(measured, data, result, nominal)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# {name}: written by `python -m fedbench.profile_device` on {measured.date}\n"
        f"# {desc.summary()}\n# Load: fedbench.devices.profile.load_profile({str(out)!r})\n"
    )
    out.write_text(header + yaml.safe_dump(data, sort_keys=False, width=100))
    profile = load_profile(out)  # what every user of the file gets; refuses a bad one
    return _report(profile, samples, held, result, out, clock)


def _mean(values: Sequence[float]) -> float:
    ok = [v for v in values if not math.isnan(v)]
    return sum(ok) / len(ok) if ok else math.nan


def _report(profile, samples, held, result, out: Path, clock: str) -> str:  # type: ignore[no-untyped-def]
    from fedbench.profiling.fit import errors

    rows = [f"{'case':<22} {'set':<8} {'measured ms':>12} {'predicted ms':>13} {'error':>8}"]
    for s in samples:
        predicted, err = errors(profile, [s])[s.name]
        rows.append(
            f"{s.name:<22} {'holdout' if s.name in held else 'fit':<8} {s.seconds * 1e3:>12.3f} "
            f"{predicted * 1e3:>13.3f} {err:>+8.1%}"
        )
    bound = (
        f" ({', '.join(result.at_bound)}: the device is outside what the profile schema can "
        "express, so models unlike the benched ones may be predicted badly)"
        if result.at_bound
        else ""
    )
    rows.append(
        f"fit: arch {result.arch}, framework {result.framework}, {result.describe()}; "
        f"rms log error {result.rms_log_error:.3f}{bound}; {clock} time"
    )
    rows.append(f"wrote {out}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    return GRAMMAR.main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
