"""`python -m fedbench [overrides]`: compose the config, check it, run it.

Hydra composes the config groups of fedbench/conf/ (read from beside the running
package: fedbench.paths); the result becomes the typed, validated Experiment
(fedbench.experiment) and is
preflighted before Hydra makes the run folder (fedbench.cli.gate). Every
user mistake, whichever layer finds it - Hydra's override grammar, its
group lookup or its config keys (fedbench.experiment.overrides), the typed
experiment, a constructor, a user app's import or its ServerApp's start -
is one line on stderr with exit code 2, and a run refused before it
started leaves no folder; a `runtime.accelerator=` this host cannot honour
is refused with the overrides, first. `dry_run=true` checks and prints what
would run.

The run folder is locked for the run (fedbench.report.lock); a folder that
already holds a run is continued only with `resume=`. A run that did not
complete (summary.json `status` failed or interrupted) exits with code 1.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import hydra
from omegaconf import DictConfig

from fedbench.cli import help as main_help
from fedbench.cli.gate import RunGate, check_fresh, check_seed, describe_lines, refuse
from fedbench.errors import FedbenchError
from fedbench.experiment.app import AppError
from fedbench.experiment.config_file import config_yaml
from fedbench.experiment.overrides import explain
from fedbench.experiment.schema import Experiment
from fedbench.folders import check_folder, write_file
from fedbench.paths import conf_dir
from fedbench.report.lock import RunLock
from fedbench.report.progress import LOG_NAME, console
from fedbench.report.provenance import COMMAND_ENV, command_line
from fedbench.report.writer import SUMMARY_JSON
from fedbench.runtime.base import Apps, build_runtime
from fedbench.train.accelerator import KEY as ACCELERATOR_KEY
from fedbench.train.accelerator import check_host

__all__ = ["check_fresh", "check_overrides", "check_seed", "main", "run"]

EXIT_RUN_FAILED = 1
EXIT_INTERRUPTED = 130  # the shell's code for "ended by Ctrl-C", as the deployment's
_HYDRA_FLAGS_WITH_VALUE = frozenset(
    {"-c", "--cfg", "-p", "--package", "-cp", "--config-path", "-cn", "--config-name"}
    | {"-cd", "--config-dir", "--experimental-rerun", "-i", "--info"}
)
# The run folders Hydra makes; an empty value would make the current folder the run's.
_RUN_DIR_KEYS = ("hydra.run.dir", "hydra.sweep.dir")


class _Task:
    started = False  # the task function was entered: later errors are the run's, not Hydra's


def run(cfg: DictConfig) -> None:
    _Task.started = True
    prepared = RunGate.take(cfg)  # checked before Hydra made the folder (fedbench.cli.gate)
    experiment, run_dir = prepared.experiment, prepared.run_dir
    with prepared.lock or RunLock(run_dir):  # the gate holds it if the folder existed
        try:
            if not prepared.resume:
                check_fresh(run_dir)  # again, now that the folder is locked
        except FedbenchError as exc:
            refuse(exc)
        try:
            console.attach(run_dir)  # everything printed from here on is also in console.log
        except FedbenchError as exc:
            refuse(exc)  # console.log is a link (fedbench.folders)
        try:
            _start(experiment, run_dir, prepared.resume)
        except FedbenchError as exc:
            if isinstance(exc, AppError) and exc.trace:
                console.record(exc.trace)  # the app's traceback: in console.log, not on screen
            refuse(f"{exc} (see {run_dir / LOG_NAME})" if isinstance(exc, AppError) else exc)
        except Exception:
            console.record(traceback.format_exc())  # the console shows it once Hydra reports it
            raise
        finally:
            console.detach(run_dir)
    _check_ending(run_dir)


def _start(experiment: Experiment, run_dir: Path, resume: bool) -> None:
    for line in describe_lines(experiment):
        console.line(line)
    if not resume:
        write_file(run_dir / "config.yaml", config_yaml(experiment))
    from fedbench.client.app import app as client_app
    from fedbench.server.app import make_server_app

    apps = Apps(server=make_server_app(experiment), client=client_app)
    build_runtime(experiment).run(experiment, run_dir, apps)


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
        sys.exit(EXIT_INTERRUPTED if status == "interrupted" else EXIT_RUN_FAILED)


def check_overrides(argv: Sequence[str]) -> None:
    """Hydra's grammar errors, run folders that cannot be made and an accelerator this
    host lacks, as one line each."""
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
        if key.lstrip("+~") in _RUN_DIR_KEYS and "${" not in value:
            _check_run_dir(key.lstrip("+~"), value)


def _check_run_dir(key: str, value: str) -> None:
    if not value.strip():
        raise FedbenchError(
            f"{key}= is empty: the run would write into the current folder; give a folder, "
            f"e.g. {key}=outputs/my-run (unset: outputs/<date>/<time>)"
        )
    check_folder(key, value)  # made and removed again: a refused run leaves nothing


main_help.register()  # fedbench/conf/hydra/help/fedbench.yaml calls it


@hydra.main(version_base=None, config_path=str(conf_dir()), config_name="config")
def _main(cfg: DictConfig) -> None:
    run(cfg)


def main() -> None:
    # The exact command line, for summary.json's provenance (also in processes started
    # for the run, e.g. the deployment's ServerApp).
    # Its secrets are masked before it reaches the environment (fedbench.core.redact).
    os.environ.setdefault(COMMAND_ENV, command_line())
    # No fixed glibc mmap threshold (fedbench.runtime.heap): at 1,000,000 devices the
    # server's whole-array passes allocate 8 MB temporaries, and mapped afresh each time
    # they page-fault: server time per round 0.35 -> 0.61 s (benchmarks/scale.py) for
    # ~40 MB less at the driver's peak.
    argv = sys.argv[1:]
    try:
        check_overrides(argv)
    except FedbenchError as exc:
        refuse(exc)
    # Hydra prints its own refusals (many lines, exit 1) unless HYDRA_FULL_ERROR lets
    # them through to here, where they become fedbench's one line (fedbench.experiment.
    # overrides). Anything that is not a refusal keeps its traceback.
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        _main()
    except Exception as exc:
        if _Task.started:
            raise  # a failure inside a run keeps its traceback
        refusal = explain(exc, [a for a in argv if not a.startswith("-")])
        if refusal is None:
            raise
        refuse(refusal)


if __name__ == "__main__":
    main()
