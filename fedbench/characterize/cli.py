"""`python -m fedbench.characterize study=<name|all> device=<profile|this> [key=value ...]`.

Keys: `study` (a name in conf/characterize, a comma list, or `all` for every
study but daily_accuracy, which trains for real and runs only when
named), `device` (a profile, or `this` for real steps on this host),
`processor` (`cpu`, or `gpu` to train on an emulated profile's GPU),
`out` (the output folder; default outputs/characterize/<study>/<device>,
and with several studies <out>/<study>), on `device=this` also `warmup`,
`steps` and `threads`; any other key is a study parameter from its YAML
(e.g. `models=densenet40,dqn`, `models=paper`, `batches=1,4,16`,
`batch_size=8`, `quick=false`, `exact_max_batch=64`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path

from fedbench.characterize.device import THIS, HostOptions, open_device
from fedbench.characterize.output import StudyResult, write_meta
from fedbench.characterize.registry import build_study, params_of, study_names
from fedbench.characterize.workloads import WorkloadBook
from fedbench.devices.schema import closest
from fedbench.errors import FedbenchError, choices

GLOBAL_KEYS: tuple[str, ...] = ("study", "device", "out", "processor")
HOST_KEYS: tuple[str, ...] = ("warmup", "steps", "threads")
TRAINS = "daily_accuracy"  # trains for real: not part of study=all
DEFAULT_ROOT = Path("outputs") / "characterize"


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    args: dict[str, str] = {}
    for item in argv:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise FedbenchError(f"argument {item!r}: expected key=value (e.g. study=batch_sweep)")
        args[key] = value
    for key in ("study", "device"):
        if key not in args:
            raise FedbenchError(
                f"missing {key}=...; usage: python -m fedbench.characterize "
                f"study=<{'|'.join(['all', *study_names()])}> device=<profile|this> [key=value ...]"
            )
    return args


def pick_studies(raw: str) -> list[str]:
    names = study_names()
    if raw == "all":
        return [n for n in names if n != TRAINS]
    picked = [s.strip() for s in raw.split(",") if s.strip()]
    for s in picked:
        if s not in names:
            raise FedbenchError(
                f"study={s!r}: no such study{closest(s, names)}; valid: all, {choices(names)}"
            )
    return picked


def host_options(args: Mapping[str, str], device: str) -> HostOptions:
    given = {k: args[k] for k in HOST_KEYS if k in args}
    if given and device != THIS:
        raise FedbenchError(f"{', '.join(given)}: only for device={THIS} (real timed steps)")
    values: dict[str, int] = {}
    for key, raw in given.items():
        if not raw.isdigit():
            raise FedbenchError(f"{key}={raw!r}: expected a non-negative integer")
        values[key] = int(raw)
    return replace(HostOptions(), **values)


def study_overrides(studies: list[str], args: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Each study's parameter overrides; a key no picked study has is an error."""
    rest = {k: v for k, v in args.items() if k not in GLOBAL_KEYS + HOST_KEYS}
    params = {s: params_of(s) for s in studies}
    for key in rest:
        if not any(key in p for p in params.values()):
            valid = sorted({*GLOBAL_KEYS, *HOST_KEYS, *(k for p in params.values() for k in p)})
            raise FedbenchError(
                f"{key}=...: not a parameter of {', '.join(studies)}{closest(key, valid)}; "
                f"valid: {choices(valid)}"
            )
    return {s: {k: v for k, v in rest.items() if k in params[s]} for s in studies}


def run_study(
    study: str,
    device: str,
    overrides: Mapping[str, str] | None = None,
    out: Path | None = None,
    host: HostOptions | None = None,
    processor: str = "cpu",
) -> StudyResult:
    """Run one study on one device; writes <out>/<study>.csv, figures and meta.json."""
    built = build_study(study, overrides or {})
    dev = open_device(device, WorkloadBook(built.exact_max_batch), host or HostOptions(), processor)
    folder = out or DEFAULT_ROOT / study / device
    folder.mkdir(parents=True, exist_ok=True)
    started, load0, t0 = datetime.now(timezone.utc), os.getloadavg(), time.perf_counter()
    result = built.run(dev, folder)
    wall = time.perf_counter() - t0
    write_meta(
        folder / "meta.json",
        {
            "study": study,
            "paper": built.paper,
            "device": device,
            "processor": processor,
            "kind": dev.kind,
            "params": asdict(built),
            "host_options": asdict(host or HostOptions()) if device == THIS else None,
            "started_utc": started.isoformat(timespec="seconds"),
            "wall_s": round(wall, 2),
            "host_cpus": os.cpu_count(),
            "loadavg_start": load0,
            "loadavg_end": os.getloadavg(),
            "summary": result.summary,
            "csv": result.csv.name,
            "figures": [f.name for f in result.figures],
        },
    )
    return replace(result, extra={"wall_s": wall})


def run(argv: Sequence[str]) -> list[StudyResult]:
    args = parse_args(argv)
    studies = pick_studies(args["study"])
    host = host_options(args, args["device"])
    overrides = study_overrides(studies, args)
    out = Path(args["out"]) if "out" in args else None
    results = []
    for study in studies:
        folder = None if out is None else (out / study if len(studies) > 1 else out)
        result = run_study(
            study, args["device"], overrides[study], folder, host, args.get("processor", "cpu")
        )
        print(
            f"[characterize] {study} on {args['device']}: {result.extra['wall_s']:.1f} s -> "
            f"{result.csv.parent}",
            file=sys.stderr,
        )
        for line in result.summary:
            print(f"  {line}")
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run(sys.argv[1:] if argv is None else argv)
    except FedbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
