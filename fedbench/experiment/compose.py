"""Hydra's composed config -> the typed Experiment: the entry points' one way in.

`python -m fedbench` (Hydra) and `flwr run .` (the ServerApp with an empty
run config) both end here. Top-level keys that are not part of the
experiment are consumed on the way: `resume`, `allow_targets`,
`resume_untrusted` and `resume_any_commit` (by the entry point) and
`app_run_config` (overrides of the app's run-config defaults, applied when
`app=` is loaded).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fedbench.errors import FedbenchError
from fedbench.experiment.app import load_app
from fedbench.experiment.schema import Experiment
from fedbench.paths import conf_dir

# Config groups that must be present after composition (fedbench/conf/).
REQUIRED_GROUPS: tuple[str, ...] = (
    "data",
    "model",
    "fleet",
    "strategy",
    "algorithm",
    "round_close",
    "mode",
    "scenario",
    "train",
    "runtime",
    "report",
    "defense",
)


def resolve(cfg: DictConfig) -> dict[str, Any]:
    """The composed config as plain data (no interpolations, no Hydra node)."""
    try:
        container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as exc:  # `seed=${nope}`, a `???` left unset
        key = getattr(exc, "full_key", None) or "config"
        raise FedbenchError(f"{key}: {str(exc).strip().splitlines()[0]}") from None
    if not isinstance(container, dict):
        raise FedbenchError("the composed config is not a mapping")
    container.pop("hydra", None)
    missing = [g for g in REQUIRED_GROUPS if g not in container]
    if missing:
        raise FedbenchError(f"config is missing the group(s): {', '.join(missing)}")
    return {str(k): v for k, v in container.items()}


def experiment_from(values: Mapping[str, Any], overrides: Sequence[str] = ()) -> Experiment:
    """The validated experiment; `overrides` are the command line's (who chose what)."""
    values = dict(values)
    for key in ("resume", "allow_targets", "resume_untrusted", "resume_any_commit", "dry_run"):
        values.pop(key, None)
    run_config = values.pop("app_run_config", None) or {}
    app = values.get("app")
    if isinstance(app, str):
        loaded = load_app(app, run_config)
        # The app's own strategy aggregates unless the command line names an algorithm.
        chose = any(o.split("=", 1)[0].lstrip("+~") == "algorithm" for o in overrides)
        values["app"] = {**loaded.to_config(), "own_strategy": not chose}
    elif run_config:
        raise FedbenchError("app_run_config is set but app= is not (a Flower app folder)")
    return Experiment.from_config(values)


def compose_experiment(overrides: Sequence[str]) -> Experiment:
    """The experiment `python -m fedbench <overrides>` would run (Hydra's compose API)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from fedbench.experiment.overrides import explain

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            cfg = compose(config_name="config", overrides=list(overrides))
    except Exception as exc:
        refusal = explain(exc, overrides)
        if refusal is None:
            raise
        raise refusal from None
    values = resolve(cfg)
    values.setdefault("output_dir", time.strftime("outputs/flwr-run/%Y-%m-%d/%H-%M-%S"))
    return experiment_from(values, overrides)
