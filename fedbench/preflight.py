"""Check an experiment before any process starts, so mistakes fail in a second.

The typed Experiment already refused unknown keys, wrong types and values
out of range. Preflight builds what the server will build - fleet, meters,
selector, Flower strategy, round-close policy, hooks, scenario, runtime,
model and data splits (fedbench's own app; a user's app: its ServerApp up to
its first send) - so a mistake a constructor finds also fails here, in one
line that names the key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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
from fedbench.server.modes import build_mode
from strategies.base import build_selector

if TYPE_CHECKING:
    from fedbench.scenarios.base import Scenario
    from fedbench.scenarios.context import DataContext


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
    from fedbench.server.submodels import check_submodels

    devices = expand_fleet(experiment.fleet)
    first = by_profile(devices)
    for profile in sorted(first):  # a bad profile or knob is refused here, not in a worker
        make_meter(first[profile], experiment.fleet.knobs, workload_optimizer(experiment.train))
    selector = build_selector(experiment)
    selector.check_fleet(len(devices))
    algorithm = build_algorithm(experiment)
    check_minimums(algorithm, selector.clients_per_round)
    check_submodels(algorithm, experiment)  # a width rule for the model, a deadline to meet
    build_mode(experiment).check(len(devices), selector.wanted(), build_close(experiment))
    build_hooks(experiment)
    scenario = build_scenario(experiment)
    runtime = build_runtime(experiment)
    runtime.preflight(experiment)
    if experiment.fleet.population is not None:
        from fedbench.server.fleet_view import FleetView

        FleetView(devices, experiment)  # draws the population: its trace files are read here
    if experiment.app is not None and not experiment.app.own_strategy:
        raise FedbenchError(
            f"algorithm=: app {experiment.app.name} aggregates with the strategy its own "
            "ServerApp starts (fedbench runs the app's loop as flwr run does); drop "
            "algorithm=, or change the strategy in the app"
        )
    if experiment.app is not None:
        # The app brings its own model and data. Its ServerApp runs once up to its first
        # send (its evaluate_fn scores the initial model on the way): an app that fails
        # at start is refused here, before the run folder exists, not from inside the run.
        from flwr.clientapp import ClientApp

        from fedbench.server.capture import first_send

        experiment.app.load(experiment.app.clientapp, ClientApp, "clientapp")  # importable?
        flwr_logger = logging.getLogger("flwr")  # its strategy's banner is not ours to print
        level = flwr_logger.level
        flwr_logger.setLevel(logging.ERROR)
        try:
            first_send(experiment.app, selector.clients_per_round)
        finally:
            flwr_logger.setLevel(level)
        return
    try:
        build_model(experiment.model)
    except InstantiationException as exc:
        raise FedbenchError(f"model.net: {str(exc).splitlines()[0]}") from None
    check_data(experiment, scenario, data_context(experiment, len(devices)))


def check_data(experiment: Experiment, scenario: Scenario, ctx: DataContext) -> None:
    """What the data must hold for this training to mean anything (fedbench's own app)."""
    data = experiment.data
    classes = int(ctx.splits.pool.y.unique().numel()) if len(ctx.splits.pool) else 0
    if classes < 2:
        raise FedbenchError(
            f"data.source: the devices' data holds {classes} class(es) of data.num_classes="
            f"{data.num_classes}; a classifier needs at least 2 - check data.source (e.g. "
            "data.source.root) points at the whole data set"
        )
    if scenario.pretrain.epochs > 0 and len(ctx.splits.server) == 0:
        raise FedbenchError(
            f"data.server_fraction={data.server_fraction:g} leaves the server no data, but "
            f"scenario.pretrain.epochs={scenario.pretrain.epochs} pretrains on it; give "
            "data.server_fraction > 0, or scenario.pretrain.epochs=0 to start untrained"
        )
    largest = max(scenario.expected_examples(ctx, i) for i in range(len(ctx.partitions)))
    batch = experiment.train.batch_size
    if batch > largest:
        raise FedbenchError(
            f"train.batch_size={batch} is larger than any device's data (at most {largest} "
            "examples a round in this scenario): every step would be the device's whole data; "
            f"choose train.batch_size <= {largest}"
        )
