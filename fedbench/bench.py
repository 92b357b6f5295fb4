"""`python -m fedbench.bench`: what one model costs on emulated devices, fully broken down.

    python -m fedbench.bench device=meizu_16t model=mobilenetv2 batch_size=8
    python -m fedbench.bench device=rpi4 model=resnet18 batch_size=16 steps=500
    python -m fedbench.bench device=all model=lenet batch_size=32
    python -m fedbench.bench device=meizu_16t model=alexnet_mnn batch_size=4 cores=1 \
        clusters=silver freq_ghz=0.3 background=true
    python -m fedbench.bench device=rpi3bplus,honor8 model=densenet40 batch_size=64 plan=auto
    python -m fedbench.bench device=rpi4 model=densenet40 batch_size=32 plan=4x8+ckpt4
    python -m fedbench.bench device=jetson_tx2 model=resnet50 batch_size=16 knobs.device=gpu

Knobs are `cores=`, `clusters=`, `freq_ghz=`, `background=`, `framework=`,
or spelled as in a fleet config, `knobs.<name>=` (`knobs.device=gpu`
trains on the profile's GPU; `device=` names the profile).

One device prints one JSON object: latency, energy, power, peak memory and
status, with every term behind them (and, for steps>1, a sampled trace of
heating and throttling): time per op class and per mechanism (im2col and
weight re-layout traffic, per-call dispatch and kernel launches, per-step
overhead, input loading, host-device copies, swapping), the clock the
cores ran at, the energy terms, the memory terms of the tensor peak and
the process's resident set against what the device keeps resident.
Several devices (`device=all` or a comma list) print a table. Every figure
comes from the emulator, so it is the same on any host. `plan=` runs the
step under a memory plan (fedbench.train.plans: full, bs32, 4x8,
bs32+ckpt4, ...); `plan=auto` lets the memory planner pick, per device, the
fastest plan that fits its training budget.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from fedbench.cli.grammar import Grammar, Key
from fedbench.core.plans import Plan, parse_plan
from fedbench.core.workload import Workload
from fedbench.devices.budget import budget_at
from fedbench.devices.constants import load_constants
from fedbench.devices.emulator import Emulation, emulate, framework_constants, framework_of
from fedbench.devices.knobs import Knobs
from fedbench.devices.memory import resident_terms
from fedbench.devices.profile import DeviceProfile, initial_state, load_profile, profile_names
from fedbench.errors import FedbenchError, choices, closest
from fedbench.measure.workload import measure_workload

_KNOBS = ("cores", "clusters", "freq_ghz", "background", "framework")
GRAMMAR = Grammar(
    prog="python -m fedbench.bench",
    summary="What one model's training costs on emulated devices, fully broken down.",
    keys=(
        Key("device", "a device profile, `all`, or a comma list of profiles", required=True),
        Key("model", "a model of the zoo (fedbench/conf/model/)", required=True),
        Key("batch_size", "samples per optimizer step", required=True),
        Key("input", "input shape like 3x224x224 (unset: the model's)"),
        Key("steps", "optimizer steps (>1 adds a heating/throttling trace)", "1"),
        Key("optimizer", "sgd, sgd_momentum or adam", "sgd_momentum"),
        Key("trainable", "all, or the trainable part (e.g. head)", "all"),
        Key("plan", "memory plan: full, bs32, 4x8, bs32+ckpt4, ... or auto (the planner)", "full"),
        Key("cores", "knob: active cores (unset: all)"),
        Key("clusters", "knob: CPU clusters to run on, e.g. little (unset: all)"),
        Key("freq_ghz", "knob: clock cap in GHz (unset: each cluster's maximum)"),
        Key("background", "knob: training at background priority (paper 002)", "false", flag=True),
        Key("framework", "knob: framework efficiency, e.g. mnn (unset: the profile's)"),
        Key("knobs.device", "knob: cpu or gpu (a profile's GPU cluster: Jetsons, Adreno)", "cpu"),
        *(Key(f"knobs.{k}", f"the fleet-config spelling of {k}=") for k in _KNOBS),
        Key("format", "json or table (unset: json for one device, table for several)"),
    ),
    examples=(
        "python -m fedbench.bench device=rpi4 model=resnet18 batch_size=16",
        "python -m fedbench.bench device=all model=mobilenetv2 batch_size=8",
        "python -m fedbench.bench device=rpi3bplus model=densenet40 batch_size=64 plan=auto",
    ),
)
KEYS = tuple(k.name for k in GRAMMAR.keys)
KNOB_KEYS = _KNOBS
# The fleet-config spelling of every knob (fleet.knobs.<name>); `knobs.device`
# has no bare form because `device=` names the profile.
FLEET_KNOB_KEYS = tuple(f"knobs.{k}" for k in ("device", *KNOB_KEYS))
TRACE_POINTS = 20


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    return GRAMMAR.parse(argv).values


def _positive_int(args: dict[str, str], key: str, default: int) -> int:
    raw = args.get(key, str(default))
    if not raw.isdigit() or int(raw) < 1:
        raise FedbenchError(f"{key}={raw!r}: expected a positive integer")
    return int(raw)


def _input_shape(raw: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if raw is None:
        return default
    parts = raw.lower().split("x")
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise FedbenchError(f"input={raw!r}: expected dimensions like 3x224x224")
    return tuple(int(p) for p in parts)


def _devices(raw: str) -> list[str]:
    names = profile_names()
    picked = names if raw == "all" else [d.strip() for d in raw.split(",") if d.strip()]
    for name in picked:
        if name not in names:
            hint = closest(name, names)
            raise FedbenchError(
                f"device={name!r}: no such profile{hint}; valid: all, {choices(names)}"
            )
    return picked


def workload_of(args: dict[str, str], profile: DeviceProfile | None = None) -> Workload:
    """The workload under `plan=` (default full); `plan=auto` plans for `profile`'s budget."""
    import torch

    from fedbench.models import build_model, input_spec, model_names  # torch-heavy

    name = args["model"]
    names = model_names()
    if name not in names:
        hint = closest(name, names)
        raise FedbenchError(f"model={name!r}: no such model{hint}; valid: {choices(names)}")
    model, shape = build_model(name)
    spec = input_spec(name)
    input_shape = _input_shape(args.get("input"), tuple(shape))
    batch = _positive_int(args, "batch_size", 1)
    check_batch_fits(name, input_shape, batch, spec.dtype)
    try:
        plan = _plan(args, model, input_shape, batch, profile, spec)
        return measure_workload(
            model,
            input_shape,
            batch,
            model_name=name,
            optimizer=args.get("optimizer", "sgd_momentum"),
            trainable=args.get("trainable", "all"),
            plan=plan.name(batch),
            checkpoint_segments=plan.checkpoint_segments,
            microbatches=plan.microbatches,
            # Token-id models (char_cnn_lstm) take integer inputs, not images.
            input_dtype=spec.dtype,
            input_high=spec.high,
        )
    except RuntimeError as exc:  # torch refusing the shapes: the user's input= does not fit
        first = str(exc).splitlines()[0]
        if isinstance(exc, torch.OutOfMemoryError) or "can't allocate memory" in first:
            raise FedbenchError(
                f"batch_size={batch}: this host ran out of memory measuring one training step "
                f"of {name} at input={'x'.join(map(str, input_shape))} ({first[-80:]}); "
                "choose a smaller batch_size"
            ) from None
        raise FedbenchError(
            f"input={'x'.join(map(str, input_shape))} does not fit model {name} "
            f"(default input {'x'.join(map(str, shape))}): {first}"
        ) from None


def check_batch_fits(name: str, input_shape: tuple[int, ...], batch: int, dtype: Any) -> None:
    """Refuse a batch whose inputs alone exceed this host's free memory, naming batch_size.

    bench measures one real training step of the model on this host (the
    device is emulated from that measurement), so the whole batch must be
    allocated here. Without this check, torch's allocation failure surfaced as
    "input= does not fit the model", blaming a shape that was fine. The inputs
    are a lower bound of what the step needs: activations come on top.
    """
    import psutil
    import torch

    per_example = math.prod(input_shape) * torch.empty((), dtype=dtype).element_size()
    free = int(psutil.virtual_memory().available)
    most = max(1, free // per_example)
    if batch > most:
        raise FedbenchError(
            f"batch_size={batch}: one batch of {name}'s inputs "
            f"({'x'.join(map(str, input_shape))}) is {batch * per_example / 2**30:.1f} GiB, more "
            f"than this host's {free / 2**30:.1f} GiB of free memory; bench measures one real "
            f"training step here, so choose batch_size 1..{most} (less still: the step's "
            "activations need memory too)"
        )


def _plan(
    args: dict[str, str],
    model: Any,
    input_shape: tuple[int, ...],
    batch: int,
    profile: DeviceProfile | None,
    spec: Any,
) -> Plan:
    raw = args.get("plan", "full")
    if raw != "auto":
        return parse_plan(raw, batch)
    if args.get("trainable", "all") != "all" or profile is None:
        raise FedbenchError("plan=auto plans for a device's budget with trainable=all only")
    from fedbench.devices.emulated_meter import EmulatedMeter
    from fedbench.train.planner import choose_plan

    meter = EmulatedMeter(profile, knobs_of(args))
    return choose_plan(
        model,
        input_shape,
        batch,
        budget_at(profile, 0.0),
        model_name=args["model"],
        optimizer=args.get("optimizer", "sgd_momentum"),
        input_dtype=spec.dtype,
        input_high=spec.high,
        time_fn=meter.step_seconds,
        holds_fn=meter.holds,
    ).plan


def knobs_of(args: dict[str, str]) -> Knobs:
    """The knobs given as `cores=...` or `knobs.cores=...` (not both)."""
    values = {k: args[k] for k in KNOB_KEYS if k in args}
    for key in FLEET_KNOB_KEYS:
        if key in args:
            name = key.removeprefix("knobs.")
            if name in values:
                raise FedbenchError(f"{name}= and {key}= both given: give one")
            values[name] = args[key]
    return Knobs.from_mapping(values, "bench")


def _trace(profile: DeviceProfile, w: Workload, steps: int, knobs: Knobs) -> list[dict[str, float]]:
    """Per-step latency, temperature and clock at up to TRACE_POINTS points along the run."""
    state = initial_state(profile, 0.0)
    bounds = sorted({round(steps * (i + 1) / TRACE_POINTS) for i in range(TRACE_POINTS)} - {0})
    out: list[dict[str, float]] = []
    done = 0
    for end in bounds:
        e = emulate(profile, [(w, end - done)], state, knobs)
        if e.status != "ok":
            break
        out.append(
            {
                "step": end,
                "time_s": round(e.state.time_s, 3),
                "step_latency_s": round(e.latency_s / (end - done), 6),
                "temp_c": round(e.temp_c_end, 2),
                "freq_ghz": round(e.freq_ghz_avg, 4),
            }
        )
        state, done = e.state, end
    return out


def report(profile: DeviceProfile, w: Workload, steps: int, knobs: Knobs) -> dict[str, Any]:
    e: Emulation = emulate(profile, [(w, steps)], initial_state(profile, 0.0), knobs)
    latency = e.latency_s
    out: dict[str, Any] = {
        "device": profile.name,
        "model": w.model,
        "batch_size": w.batch_size,
        "input": "x".join(str(d) for d in w.input_shape),
        "steps": steps,
        "plan": w.plan,
        "framework": framework_of(profile, knobs, load_constants()),
        "processor": knobs.device,
        "knobs": {
            k: v
            for k, v in asdict(knobs).items()
            if v not in (None, (), False) and not (k == "device" and v == "cpu")
        },
        "status": e.status,
        "reason": e.reason,
        "latency_s": latency,
        "step_latency_s": latency / steps,
        "throughput_samples_s": w.batch_size * steps / latency if latency > 0 else math.nan,
        "energy_j": e.energy_j,
        "avg_power_w": e.avg_power_w,
        "peak_mem_mb": e.peak_mem_mb,
        "mem_budget_mb": e.mem_budget_mb,
        "rss_mb": e.rss_mb,
        "resident_limit_mb": profile.memory.resident_mb,
        "swapped_mb": e.swapped_mb,
        "temp_c_start": e.temp_c_start,
        "temp_c_end": e.temp_c_end,
        "freq_ghz_avg": e.freq_ghz_avg,
        "throttled_frac": e.throttled_frac,
        "battery_pct": e.battery_pct,
        "busy_cores": e.busy_cores,
        "gflop_per_step": w.total_flops / 1e9,
        "breakdown": {
            "time_s": dict(e.time_s),
            "energy_j": dict(e.energy_terms_j),
            "memory_mb": dict(e.memory_mb),
            # The resident set's terms (fedbench/devices/memory.py); they sum to rss_mb.
            "resident_mb": resident_terms(w, framework_constants(profile, knobs, load_constants())),
        },
    }
    if steps > 1 and e.status == "ok":
        out["trace"] = _trace(profile, w, steps, knobs)
    return out


def _table(rows: list[dict[str, Any]]) -> str:
    cols = (
        ("device", "{}"),
        ("status", "{}"),
        ("step_latency_s", "{:.4g}"),
        ("throughput_samples_s", "{:.4g}"),
        ("energy_j", "{:.4g}"),
        ("avg_power_w", "{:.3g}"),
        ("peak_mem_mb", "{:.0f}"),
        ("mem_budget_mb", "{:.0f}"),
        ("temp_c_end", "{:.1f}"),
        ("throttled_frac", "{:.2f}"),
        ("plan", "{}"),
    )
    cells = [[c for c, _ in cols]] + [[fmt.format(r[c]) for c, fmt in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "\n".join(
        "  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells
    )


def _finite(obj: Any) -> Any:
    """NaN (a figure that does not exist, e.g. latency of an oom) as JSON null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def run(argv: Sequence[str]) -> str:
    args = parse_args(argv)
    devices = _devices(args["device"])
    knobs = knobs_of(args)
    steps = _positive_int(args, "steps", 1)
    fmt = args.get("format", "json" if len(devices) == 1 else "table")
    if fmt not in ("json", "table"):
        raise FedbenchError(f"format={fmt!r}: valid: json, table")
    profiles = [load_profile(d) for d in devices]
    if args.get("plan") == "auto":  # a plan per device: its budget decides
        rows = [report(p, workload_of(args, p), steps, knobs) for p in profiles]
    else:
        w = workload_of(args)
        rows = [report(p, w, steps, knobs) for p in profiles]
    if fmt == "table":
        return _table(rows)
    return json.dumps(_finite(rows[0] if len(rows) == 1 else rows), indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    return GRAMMAR.main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
