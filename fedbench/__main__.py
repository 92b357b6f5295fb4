"""`python -m fedbench [overrides]`: compose the config, check it, run it.

Hydra composes conf/ (installed as the package fedbench.conf); the result
becomes the typed, validated Experiment (fedbench.experiment) before
anything starts. A user mistake raises FedbenchError, printed as one line
with exit code 2; Hydra itself reports unknown groups and options with the
valid choices.
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
from pathlib import Path

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from fedbench.cli import help as main_help
from fedbench.errors import FedbenchError
from fedbench.experiment.build import build_runtime
from fedbench.experiment.compose import experiment_from, resolve
from fedbench.preflight import preflight, targets
from fedbench.report.progress import console
from fedbench.report.provenance import COMMAND_ENV
from fedbench.resume import resumed_experiment


def run(cfg: DictConfig) -> None:
    values = resolve(cfg)
    resume = values.pop("resume", None)
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    values["output_dir"] = str(run_dir)
    if not values.get("name"):
        values["name"] = hydra_cfg.runtime.choices.get("experiment") or "default"
    overrides = list(hydra_cfg.overrides.task)
    experiment = experiment_from(values, overrides)
    if resume:
        others = [o for o in overrides if not o.startswith("resume=")]
        experiment = resumed_experiment(Path(resume), experiment if others else None)
        run_dir = Path(experiment.output_dir)
    console.attach(run_dir)  # everything printed from here on is also in console.log
    try:
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
        build_runtime(experiment).run(experiment, run_dir)
    except FedbenchError as exc:
        print(f"fedbench: error: {exc}", file=sys.stderr)  # in console.log too
        sys.exit(2)
    except Exception:
        console.record(traceback.format_exc())  # the console shows it once Hydra reports it
        raise
    finally:
        console.detach(run_dir)


main_help.register()  # conf/hydra/help/fedbench.yaml calls it


@hydra.main(version_base=None, config_path="pkg://fedbench.conf", config_name="config")
def _main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except FedbenchError as exc:
        print(f"fedbench: error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    # The exact command line, for summary.json's provenance (also in processes started
    # for the run, e.g. the deployment's ServerApp).
    os.environ.setdefault(COMMAND_ENV, shlex.join(getattr(sys, "orig_argv", sys.argv)))
    _main()


if __name__ == "__main__":
    main()
