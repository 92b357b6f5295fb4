"""Check an experiment before any process starts, so mistakes fail in a second.

Builds what the server will build - fleet, strategy, scenario, data splits,
model - and turns every user mistake into one FedbenchError line that names
the key or value and what would be valid.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from fedbench.devices.faults import fault_models
from fedbench.errors import FedbenchError
from fedbench.fleet import expand_fleet

GROUPS_WITH_TARGET: tuple[str, ...] = ("strategy", "scenario", "runtime")


def build(group: str, cfg: Any) -> Any:
    """instantiate(cfg) with Hydra's wrapping peeled off a user mistake.

    A FedbenchError from a constructor, a keyword the class does not take,
    or a `_target_` naming nothing become one-line errors; anything else
    (a bug in fedbench) keeps its traceback.
    """
    try:
        return instantiate(OmegaConf.create(cfg) if isinstance(cfg, dict) else cfg)
    except InstantiationException as exc:
        cause = exc.__cause__
        if isinstance(cause, FedbenchError):
            raise cause from None
        if isinstance(cause, TypeError) and "argument" in str(cause):
            raise FedbenchError(f"{group}: {cause}") from None
        target = str(cfg.get("_target_", "")) if hasattr(cfg, "get") else ""
        if target and not _locatable(target):
            raise FedbenchError(
                f"{group}._target_: nothing named '{target}' can be imported"
            ) from None
        raise


def _locatable(target: str) -> bool:
    """Whether `target`'s module exists (an error inside it is a bug, not a typo)."""
    module = target.rsplit(".", 1)[0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def targets(experiment: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every `_target_` in the experiment with its key path (logged at start)."""
    for key, value in experiment.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if "_target_" in value:
                yield path, str(value["_target_"])
            yield from targets(value, prefix=f"{path}.")


def preflight(experiment: dict[str, Any]) -> None:
    from fedbench.app.client_app import build_model
    from fedbench.devices.meters import make_meter
    from fedbench.scenarios.context import data_context

    devices = expand_fleet(experiment["fleet"])
    fault_models(experiment["fleet"].get("faults"))
    for profile in sorted({d.profile for d in devices}):
        make_meter(profile, experiment["fleet"].get("knobs"))
    selector = build("strategy", experiment["strategy"])
    selector.check_fleet(len(devices))
    build("scenario", experiment["scenario"])
    build("runtime", experiment["runtime"])
    try:
        build_model(experiment)
    except InstantiationException as exc:
        raise FedbenchError(f"model.net: {str(exc).splitlines()[0]}") from None
    data_context(experiment, len(devices))
