"""Everything a run can be refused for, checked before Hydra makes its run folder.

Hydra creates `hydra.run.dir` (and writes `.hydra/` into it) before it calls
the task function, so a run refused inside the task still left an
`outputs/<date>/<time>/` folder behind - or overwrote the `.hydra/` of a
folder that holds another run. `RunGate` is a Hydra callback
(fedbench/conf/config.yaml, `hydra.callbacks.gate`) whose `on_run_start` runs before
that: it builds the typed experiment, checks `resume=` and the run folder,
and preflights every object the run will build. A refusal is one line on
stderr and exit code 2, and nothing is written. `dry_run=true` stops there
after printing what would run. A sweep (`-m`) has every job checked the
same way in `on_multirun_start`, before the sweep's folder exists (Hydra's
basic sweeper; a search plugin picks its jobs as it goes, so each of those
is checked in its own folder, which is removed again if it is refused).

`resume=<folder>` runs in that folder: the gate points Hydra's run
directory at it and turns `.hydra/` off, so a resumed run neither makes an
empty folder nor overwrites the original run's `.hydra/`.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from fedbench.errors import FedbenchError
from fedbench.experiment.compose import experiment_from, resolve
from fedbench.experiment.schema import MAX_SEED, Experiment
from fedbench.folders import check_no_links
from fedbench.paths import where_line
from fedbench.preflight import preflight, targets
from fedbench.report.lock import RunLock
from fedbench.report.provenance import EARLIER_CODE_ENV
from fedbench.report.writer import ROUNDS_CSV
from fedbench.server.checkpoint import CHECKPOINT
from fedbench.trust.targets import parse_allowed

EXIT_USER_ERROR = 2
HYDRA_OUTPUT = ".hydra"
# How to continue a folder, not what runs: given with resume=, they leave it alone.
_RESUME_KEYS = frozenset(
    {"resume", "allow_targets", "resume_untrusted", "resume_any_commit", "dry_run"}
)


@dataclass(frozen=True)
class Prepared:
    """A run that passed every check: what the task function starts."""

    experiment: Experiment
    run_dir: Path
    resume: bool
    dry_run: bool
    lock: RunLock | None = None  # taken when the folder already existed: the run keeps it


def refuse(exc: FedbenchError | str, prog: str = "fedbench") -> NoReturn:
    """A user mistake: one line on stderr, exit code 2."""
    text = " ".join(str(exc).split("\n")).strip()
    print(f"{prog}: error: {text}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USER_ERROR)


def check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise FedbenchError(f"seed={seed!r}: expected an integer in 0..{MAX_SEED:,}")


def resume_folder(value: object) -> Path | None:
    """`resume=`'s folder; None for a new run. An empty `resume=` is refused.

    `resume=` with nothing after it reads as an empty string, which is false:
    taken as "no resume", it silently started a new run in a new folder while
    the user meant to continue one.
    """
    if value is None or value is False:  # resume=false: a new run, as it always was
        return None
    if value is True or not str(value).strip():
        shown = "true" if value is True else " is empty"
        raise FedbenchError(
            f"resume={shown}: give the run folder to continue, e.g. "
            "resume=outputs/2025-01-01/12-00-00 (or leave resume out for a new run)"
        )
    return Path(str(value))


def _resume_flag(values: dict[str, Any], key: str, resume: Path | None) -> bool:
    """`resume_untrusted=` or `resume_any_commit=`: a bool, true only with resume=."""
    value = values.pop(key, False)
    if not isinstance(value, bool) or (value and not resume):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        raise FedbenchError(f"{key}={shown}: true or false, and true only with resume=<folder>")
    return value


def check_fresh(run_dir: Path) -> None:
    """A new run never writes into a folder that holds another's results."""
    held = [n for n in (ROUNDS_CSV, CHECKPOINT) if (run_dir / n).exists()]
    if held:
        raise FedbenchError(
            f"run folder {run_dir} already holds a run ({', '.join(held)}); continue it with "
            f"resume={run_dir}, or give another hydra.run.dir"
        )


def prepare(cfg: DictConfig, hydra_cfg: Any, run_dir: Path) -> Prepared:
    """The checked run of a composed config (`cfg` without its `hydra` node)."""
    from fedbench.resume import resumed_experiment

    values = resolve(cfg)
    resume = resume_folder(values.pop("resume", None))
    dry_run = bool(values.pop("dry_run", False))
    allow_targets = parse_allowed(values.pop("allow_targets", None))
    untrusted = _resume_flag(values, "resume_untrusted", resume)
    any_commit = _resume_flag(values, "resume_any_commit", resume)
    check_seed(values.get("seed"))
    values["output_dir"] = str(run_dir)
    if not values.get("name"):
        values["name"] = hydra_cfg.runtime.choices.get("experiment") or "default"
    overrides = [str(o) for o in hydra_cfg.overrides.task]
    experiment = experiment_from(values, overrides)
    if resume:
        others = [o for o in overrides if o.split("=", 1)[0].lstrip("+") not in _RESUME_KEYS]
        experiment = resumed_experiment(
            resume, experiment if others else None, allow_targets, untrusted, any_commit
        )
        run_dir = Path(experiment.output_dir)
    # A folder that exists may be another run's: whether a run holds it is the first thing
    # to say, before what it holds. A folder that does not exist yet is not made here.
    if run_dir.is_dir():
        # Nothing is written through a link planted in it, by fedbench or by Hydra (.hydra/):
        # refused before either writes (fedbench.folders).
        check_no_links(run_dir)
    lock = RunLock(run_dir).acquire() if run_dir.is_dir() and not dry_run else None
    try:
        if not resume:
            os.environ.pop(EARLIER_CODE_ENV, None)  # a new run's code wrote all of it
            check_fresh(run_dir)
        preflight(experiment)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return Prepared(experiment, run_dir, bool(resume), dry_run, lock)


def describe_lines(experiment: Experiment) -> list[str]:
    """Every `_target_` the run builds, with its key (printed as a run starts)."""
    # A user's app brings its own model, data and training: those groups do not apply.
    unused = ("data", "model", "train") if experiment.app is not None else ()
    lines = [where_line()]  # which checkout or install, and the YAML folders it reads
    lines += [
        f"{path}: {target}"
        for path, target in targets(experiment.to_config())
        if path.split(".")[0] not in unused
    ]
    if experiment.app is not None:
        lines.append(f"app: {experiment.app.clientapp} ({experiment.app.root})")
    return lines


def describe(prepared: Prepared) -> str:
    """What a dry run prints: what would be built, and where the run would write."""
    verb = "would continue" if prepared.resume else "would write"
    lines = describe_lines(prepared.experiment)
    lines.append(f"config ok: {prepared.experiment.name} {verb} {prepared.run_dir}")
    return "\n".join(lines)


class RunGate(Callback):
    """Hydra callback: refuse a run before its folder exists (see the module docstring)."""

    pending: Prepared | None = None  # handed to the task function of this process's run

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        HydraConfig.instance().set_config(config)  # for ${hydra:...} in the task config
        run_dir = Path(str(config.hydra.run.dir)).absolute()
        try:
            prepared = prepare(_task_config(config), config.hydra, run_dir)
        except FedbenchError as exc:
            refuse(exc)
        if prepared.dry_run:
            print(describe(prepared), flush=True)
            sys.exit(0)
        if prepared.resume:
            with read_write(config.hydra), open_dict(config.hydra):
                config.hydra.run.dir = str(prepared.run_dir)
                config.hydra.output_subdir = None  # the folder's own .hydra/ stays as it was
        RunGate.pending = prepared

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Every job of the sweep is checked before the first starts (Hydra's basic sweeper)."""
        checked: list[str] = []
        dry_run = False
        try:
            # The folder name as Hydra will resolve it for each job: `${hydra.job.num}` by
            # default, or whatever the user made of hydra.sweep.subdir (e.g. `${seed}`).
            sweep = OmegaConf.to_container(config.hydra.sweep, resolve=False)
            subdir = str(sweep["subdir"]) if isinstance(sweep, dict) else "${hydra.job.num}"
            for i, total, job in _sweep_jobs(config):
                shown = " ".join(job) or "(no overrides)"
                try:
                    prepared = prepare_job(job, Path(str(config.hydra.sweep.dir)), subdir, i)
                except FedbenchError as exc:
                    raise FedbenchError(f"sweep job {i + 1}/{total} ({shown}): {exc}") from None
                dry_run = prepared.dry_run
                checked.append(f"job {i + 1}/{total} ({shown}): {describe(prepared)}")
        except FedbenchError as exc:
            refuse(exc)
        if dry_run:  # the sweep's folder is never made
            print("\n".join(checked), flush=True)
            sys.exit(0)

    @staticmethod
    def take(cfg: DictConfig) -> Prepared:
        """The run the gate checked, or (a sweep's job) this job checked in its folder."""
        prepared, RunGate.pending = RunGate.pending, None
        if prepared is not None:
            return prepared
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        try:
            prepared = prepare(cfg, HydraConfig.get(), run_dir)
        except FedbenchError as exc:
            discard(run_dir)
            refuse(exc)
        if prepared.dry_run:
            discard(run_dir)
            print(describe(prepared), flush=True)
            sys.exit(0)
        return prepared


def _sweep_jobs(config: DictConfig) -> list[tuple[int, int, list[str]]]:
    """(number, count, overrides) of each job Hydra's basic sweeper will run; [] for others."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return []  # a search (Optuna, ...) picks its jobs as it goes
    params = config.hydra.sweeper.get("params") or {}
    items = [f"{k}={v}" for k, v in params.items()] + [str(o) for o in config.hydra.overrides.task]
    parsed = OverridesParser.create().parse_overrides(items)
    jobs = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    return [(i, len(jobs), job) for i, job in enumerate(jobs)]


def prepare_job(overrides: list[str], sweep_dir: Path, subdir: str, num: int) -> Prepared:
    """One job's checks, its config composed as Hydra will compose it, in the folder
    Hydra will give it: `sweep_dir`/`subdir` resolved in that config as job `num`."""
    from hydra import compose

    from fedbench.experiment.overrides import explain

    try:
        config = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    except Exception as exc:
        refusal = explain(exc, overrides)
        if refusal is None:
            raise
        raise refusal from None
    with read_write(config), open_dict(config):
        config.hydra.job.num = num
        config.hydra.sweep.subdir = subdir
    run_dir = sweep_dir / str(config.hydra.sweep.subdir)
    HydraConfig.instance().set_config(config)
    return prepare(_task_config(config), config.hydra, run_dir)


def discard(run_dir: Path) -> None:
    """Remove the folder Hydra made for a job that never started (only `.hydra/` in it)."""
    if not run_dir.is_dir() or any(p.name != HYDRA_OUTPUT for p in run_dir.iterdir()):
        return
    shutil.rmtree(run_dir / HYDRA_OUTPUT, ignore_errors=True)
    with contextlib.suppress(OSError):  # something else appeared in it meanwhile
        run_dir.rmdir()


def _task_config(config: DictConfig) -> DictConfig:
    """The config the task function gets: Hydra's run_job drops the `hydra` node the same way."""
    task = copy.deepcopy(config)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return task
