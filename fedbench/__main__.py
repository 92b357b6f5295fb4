"""`python -m fedbench [overrides]`: compose the config, check it, run it.

Hydra composes conf/ (installed as the package fedbench.conf); the result
becomes the typed, validated Experiment (fedbench.experiment) before
anything starts. A user mistake raises FedbenchError, printed as one line
with exit code 2; Hydra itself reports unknown groups and options with the
valid choices. Overrides Hydra's grammar cannot parse, and run folders
that cannot be created, are refused here first, in one line, and so is a
`runtime.accelerator=` this host cannot honour (no run folder is made).

The run folder is locked for the run (fedbench.report.lock); a folder that
already holds a run is continued only with `resume=`. A run that did not
complete (summary.json `status` failed or interrupted) exits with code 1.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from fedbench.cli import help as main_help
from fedbench.errors import FedbenchError
from fedbench.experiment.compose import experiment_from, resolve
from fedbench.experiment.schema import MAX_SEED, Experiment
from fedbench.preflight import preflight, targets
from fedbench.report.lock import RunLock
from fedbench.report.progress import console
from fedbench.report.provenance import COMMAND_ENV
from fedbench.report.writer import ROUNDS_CSV, SUMMARY_JSON
from fedbench.resume import resumed_experiment
from fedbench.runtime.base import Apps, build_runtime
from fedbench.server.checkpoint import CHECKPOINT
from fedbench.train.accelerator import KEY as ACCELERATOR_KEY
from fedbench.train.accelerator import check_host
from fedbench.trust.targets import parse_allowed

EXIT_USER_ERROR, EXIT_RUN_FAILED = 2, 1
# How to continue a folder, not what runs: given with resume=, they leave it alone.
_RESUME_KEYS = frozenset({"resume", "allow_targets", "resume_untrusted"})
_HYDRA_FLAGS_WITH_VALUE = frozenset(
    {"-c", "--cfg", "-p", "--package", "-cp", "--config-path", "-cn", "--config-name"}
    | {"-cd", "--config-dir", "--experimental-rerun", "-i", "--info"}
)


def run(cfg: DictConfig) -> None:
    values = resolve(cfg)
    resume = values.pop("resume", None)
    allow_targets = parse_allowed(values.pop("allow_targets", None))
    untrusted = values.pop("resume_untrusted", False)
    if not isinstance(untrusted, bool) or (untrusted and not resume):
        shown = str(untrusted).lower() if isinstance(untrusted, bool) else repr(untrusted)
        raise FedbenchError(
            f"resume_untrusted={shown}: true or false, and true only with resume=<folder>"
        )
    check_seed(values.get("seed"))
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    values["output_dir"] = str(run_dir)
    if not values.get("name"):
        values["name"] = hydra_cfg.runtime.choices.get("experiment") or "default"
    overrides = list(hydra_cfg.overrides.task)
    experiment = experiment_from(values, overrides)
    if resume:
        others = [o for o in overrides if o.split("=", 1)[0].lstrip("+") not in _RESUME_KEYS]
        experiment = resumed_experiment(
            Path(resume), experiment if others else None, allow_targets, untrusted
        )
        run_dir = Path(experiment.output_dir)
    with RunLock(run_dir):
        if not resume:
            _check_fresh(run_dir)
        console.attach(run_dir)  # everything printed from here on is also in console.log
        try:
            _start(experiment, run_dir, bool(resume))
        except FedbenchError as exc:
            print(f"fedbench: error: {exc}", file=sys.stderr)  # in console.log too
            sys.exit(EXIT_USER_ERROR)
        except Exception:
            console.record(traceback.format_exc())  # the console shows it once Hydra reports it
            raise
        finally:
            console.detach(run_dir)
    _check_ending(run_dir)


def _start(experiment: Experiment, run_dir: Path, resume: bool) -> None:
    # A user's app brings its own model, data and training: those groups do not apply.
    unused = ("data", "model", "train") if experiment.app is not None else ()
    for path, target in targets(experiment.to_config()):
        if path.split(".")[0] not in unused:
            console.line(f"{path}: {target}")
    if experiment.app is not None:
        console.line(f"app: {experiment.app.clientapp} ({experiment.app.root})")
    preflight(experiment)
    if not resume:
        config = yaml.safe_dump(experiment.to_config(), sort_keys=False)
        (run_dir / "config.yaml").write_text(config)
    from fedbench.client.app import app as client_app
    from fedbench.server.app import make_server_app

    apps = Apps(server=make_server_app(experiment), client=client_app)
    build_runtime(experiment).run(experiment, run_dir, apps)


def check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise FedbenchError(f"seed={seed!r}: expected an integer in 0..{MAX_SEED:,}")


def _check_fresh(run_dir: Path) -> None:
    """A new run never writes into a folder that holds another's results."""
    held = [n for n in (ROUNDS_CSV, CHECKPOINT) if (run_dir / n).exists()]
    if held:
        raise FedbenchError(
            f"run folder {run_dir} already holds a run ({', '.join(held)}); continue it with "
            f"resume={run_dir}, or give another hydra.run.dir"
        )


def _check_ending(run_dir: Path) -> None:
    """Exit non-zero unless the run's summary says it completed."""
    try:
        summary = json.loads((run_dir / SUMMARY_JSON).read_text())
    except (OSError, ValueError):
        return  # a runtime that failed before the ServerApp started raised already
    status = summary.get("status")
    if status != "completed":
        # "running": the ServerApp was stopped before it could say how the run ended.
        failure = summary.get("failure") or ("unfinished" if status == "running" else status)
        print(
            f"fedbench: run {status} ({failure}): {summary.get('error', '')}; see {run_dir}",
            file=sys.stderr,
        )
        sys.exit(EXIT_RUN_FAILED)


def check_overrides(argv: Sequence[str]) -> None:
    """Hydra's grammar errors and run folders that cannot be made, as one line each."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    given = dict(arg.partition("=")[::2] for arg in argv if not arg.startswith("-"))
    accelerator = given.get(ACCELERATOR_KEY) or given.get(f"+{ACCELERATOR_KEY}")
    cluster = given.get("runtime.ray_address") not in (None, "", "null")
    if accelerator and "${" not in accelerator and not cluster:
        # Before any folder is made: a run on an accelerator this host lacks never starts
        # (a Ray cluster's GPUs are its nodes': the runtime checks those once it joins).
        check_host(accelerator)
    parser = OverridesParser.create()
    skip_next = False
    for arg in argv:
        if skip_next or arg.startswith("-"):
            # Hydra's own flags (--multirun, --cfg job, ...); some take the next word.
            skip_next = not skip_next and arg in _HYDRA_FLAGS_WITH_VALUE
            continue
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as exc:
            lines = [x for x in str(exc).splitlines() if x.strip()]
            detail = next((x for x in lines if not x.startswith(("See ", "Error parsing"))), "")
            raise FedbenchError(
                f"cannot read the override {arg!r} ({detail}): quote a value with spaces, "
                "brackets or commas as a whole, e.g. 'name=\"my run\"' or "
                "'fleet.devices=[{profile: rpi4, count: 2}]', and give key=value"
            ) from None
        key, _, value = arg.partition("=")
        if key.lstrip("+~") == "hydra.run.dir" and value and "${" not in value:
            _check_run_dir(Path(value))


def _check_run_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FedbenchError(
            f"hydra.run.dir={path}: cannot create the run folder ({exc.strerror or exc}); "
            "give a folder this user can write"
        ) from None
    if not path.is_dir():
        raise FedbenchError(f"hydra.run.dir={path}: not a folder")


main_help.register()  # conf/hydra/help/fedbench.yaml calls it


@hydra.main(version_base=None, config_path="pkg://fedbench.conf", config_name="config")
def _main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except FedbenchError as exc:
        print(f"fedbench: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)


def main() -> None:
    # The exact command line, for summary.json's provenance (also in processes started
    # for the run, e.g. the deployment's ServerApp).
    os.environ.setdefault(COMMAND_ENV, shlex.join(getattr(sys, "orig_argv", sys.argv)))
    try:
        check_overrides(sys.argv[1:])
    except FedbenchError as exc:
        print(f"fedbench: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    _main()


if __name__ == "__main__":
    main()
