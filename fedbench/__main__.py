"""`python -m fedbench [overrides]`: compose the config, check it, run it.

Hydra composes conf/ (installed as the package fedbench.conf). A user mistake
raises FedbenchError, printed as one line with exit code 2; Hydra itself
reports unknown groups and options with the valid choices.
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
from hydra.utils import instantiate
from omegaconf import DictConfig

from fedbench.cli import help as main_help
from fedbench.config import resolve
from fedbench.errors import FedbenchError
from fedbench.preflight import preflight, targets
from fedbench.report.progress import console
from fedbench.report.provenance import COMMAND_ENV
from fedbench.resume import resumed_experiment


def run(cfg: DictConfig) -> None:
    experiment = resolve(cfg)
    resume = experiment.pop("resume", None)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    experiment["output_dir"] = str(run_dir)
    if "name" not in experiment:
        choices = HydraConfig.get().runtime.choices
        experiment["name"] = choices.get("experiment") or "default"
    if resume:
        overrides = [o for o in HydraConfig.get().overrides.task if not o.startswith("resume=")]
        experiment = resumed_experiment(Path(resume), experiment if overrides else None)
        run_dir = Path(experiment["output_dir"])
    console.attach(run_dir)  # everything printed from here on is also in console.log
    try:
        for path, target in targets(experiment):
            console.line(f"{path}: {target}")
        preflight(experiment)
        if not resume:
            (run_dir / "config.yaml").write_text(yaml.safe_dump(experiment, sort_keys=False))
        runtime = instantiate(cfg.runtime)
        runtime.run(experiment, run_dir, bool(experiment.get("verbose", False)))
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
