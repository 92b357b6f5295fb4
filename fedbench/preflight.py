"""Check an experiment before any process starts, so mistakes fail in a second.

The typed Experiment already refused unknown keys, wrong types and values
out of range. Preflight builds what the server will build - fleet, meters,
selector, Flower strategy, round-close policy, hooks, scenario, runtime,
model and data splits (fedbench's own app) - so a mistake a constructor finds also
fails here, in one line that names the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hydra.errors import InstantiationException

from fedbench.devices.meters import make_meter
from fedbench.errors import FedbenchError
from fedbench.experiment.build import build_algorithm, build_model, workload_optimizer
from fedbench.experiment.fleet import by_profile, expand_fleet
from fedbench.experiment.schema import Experiment
from fedbench.runtime.base import build_runtime
from fedbench.scenarios.base import build_scenario
from fedbench.server.close.base import build_close
from fedbench.server.hooks import build_hooks
from strategies.base import build_selector


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
    first = by_profile(devices)
    for profile in sorted(first):  # a bad profile or knob is refused here, not in a worker
        make_meter(first[profile], experiment.fleet.knobs, workload_optimizer(experiment.train))
    selector = build_selector(experiment)
    selector.check_fleet(len(devices))
    check_minimums(build_algorithm(experiment), selector.clients_per_round)
    build_close(experiment)
    build_hooks(experiment)
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
