"""`python -m fedbench.characterize study=<name|all> device=<profile|this> [key=value ...]`.

Keys: `study` (a name in fedbench/conf/characterize, a comma list, or `all` for every
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
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

from fedbench.characterize.device import THIS, HostOptions
from fedbench.characterize.open import open_device
from fedbench.characterize.output import StudyResult, write_meta
from fedbench.characterize.progress import ShownDevice
from fedbench.characterize.registry import build_study, params_of, study_config, study_names
from fedbench.characterize.workloads import WorkloadBook
from fedbench.cli.grammar import Args, Grammar, Key
from fedbench.errors import FedbenchError, choices, closest
from fedbench.report.progress import console

TRAINS = "daily_accuracy"  # trains for real: not part of study=all
DEFAULT_ROOT = Path("outputs") / "characterize"


def _study_help(args: Args) -> str:
    """Each study's parameters and their defaults (only the named study's, if given)."""
    names = study_names()
    picked = [s for s in (args.get("study") or "").split(",") if s in names] or names
    out = ["study parameters (key=value; defaults from fedbench/conf/characterize/<study>.yaml):"]
    for study in picked:
        out.append(f"  {study}:")
        for key, default in study_config(study).items():
            if key != "_target_":
                out.append(f"    {key}={_shown(default)}")
    return "\n".join(out)


def _shown(value: object) -> str:
    """A YAML default as it is typed on the command line."""
    if isinstance(value, list):
        return ",".join(_shown(v) for v in value)
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return str(value)


GRAMMAR = Grammar(
    prog="python -m fedbench.characterize",
    summary="Papers 000-002's characterisation studies on an emulated device or this host.",
    keys=(
        Key(
            "study", "a study, a comma list, or all (every study but daily_accuracy)", required=True
        ),
        Key("device", "a device profile, or `this` for real timed steps here", required=True),
        Key("processor", "cpu, or gpu: train on the emulated profile's GPU cluster", "cpu"),
        Key(
            "out",
            "output folder (unset: outputs/characterize/<study>/<device>; "
            "with several studies <out>/<study>)",
        ),
        Key("warmup", "device=this: untimed steps first", str(HostOptions.warmup)),
        Key("steps", "device=this: timed steps, at least", str(HostOptions.steps)),
        Key("threads", "device=this: training threads (unset: every CPU allowed)"),
    ),
    examples=(
        "python -m fedbench.characterize study=batch_sweep device=jetson_tx2",
        "python -m fedbench.characterize study=all device=rpi4 out=results/rpi4",
        "python -m fedbench.characterize study=cpu_config device=this models=lenet",
    ),
    open_keys="Any other key is a parameter of the chosen studies (below); "
    "`python -m fedbench.characterize study=NAME --help` lists one study's.",
    aliases={"hydra.run.dir": "out"},
    extra_help=_study_help,
)
GLOBAL_KEYS: tuple[str, ...] = ("study", "device", "out", "processor")
HOST_KEYS: tuple[str, ...] = ("warmup", "steps", "threads")


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    return GRAMMAR.parse(argv).values


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
    started, load0, t0 = datetime.now(UTC), os.getloadavg(), time.perf_counter()
    with console.task(f"{study} on {device}", unit="steps") as task:
        result = built.run(ShownDevice(dev, task), folder)
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
        console.line(f"{study} on {args['device']} -> {result.csv.parent}")
        for line in result.summary:
            print(f"  {line}")
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    return GRAMMAR.main(run, argv)
