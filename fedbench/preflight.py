"""Check an experiment before any process starts, so mistakes fail in a second.

The typed Experiment already refused unknown keys, wrong types and values
out of range. Preflight builds what the server will build - fleet, meters,
selector, Flower strategy, round-close policy, scenario, runtime, model and
data splits (fedbench's own app) - so a mistake a constructor finds also
fails here, in one line that names the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hydra.errors import InstantiationException

from fedbench.devices.meters import make_meter
from fedbench.errors import FedbenchError
from fedbench.experiment.build import (
    build_algorithm,
    build_close,
    build_model,
    build_runtime,
    build_scenario,
    build_selector,
)
from fedbench.experiment.schema import Experiment
from fedbench.fleet import expand_fleet


def targets(config: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every `_target_` in the experiment with its key path (logged at start)."""
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if "_target_" in value:
                yield path, str(value["_target_"])
            yield from targets(value, prefix=f"{path}.")


def preflight(experiment: Experiment) -> None:
    from fedbench.scenarios.context import data_context
    from fedbench.server.fleet_strategy import check_minimums

    devices = expand_fleet(experiment.fleet)
    for profile in sorted(devices.profile_names):
        make_meter(profile, experiment.fleet.knobs)
    selector = build_selector(experiment)
    selector.check_fleet(len(devices))
    check_minimums(build_algorithm(experiment), selector.clients_per_round)
    build_close(experiment)
    build_scenario(experiment)
    runtime = build_runtime(experiment)
    runtime.preflight(experiment)
    if experiment.app is not None:
        return  # the app brings its own model and data; its ServerApp is run at start
    try:
        build_model(experiment.model)
    except InstantiationException as exc:
        raise FedbenchError(f"model.net: {str(exc).splitlines()[0]}") from None
    data_context(experiment, len(devices))
