"""What fedbench relies on in Flower, pinned: each test says what changed when it fails.

fedbench composes with Flower at its public seams only; two of them rest on
facts about Flower's behaviour rather than on an interface, and these tests
hold those facts (pyproject.toml states the Flower range they pass on):

- fedbench.server.capture binds `Strategy.start`'s documented arguments;
- fedbench.server.offer knows how many nodes a strategy waits for from its
  settings, and that a strategy reads the node ids twice per configure call
  (a third read is a wait).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Message
from flwr.serverapp import Grid
from flwr.serverapp import strategy as flower
from flwr.serverapp.strategy import FedAvg, Strategy

from fedbench.experiment.app import load_app
from fedbench.server.capture import START_ARGUMENTS, capture
from fedbench.server.offer import ASKS_PER_CONFIGURE, Offer, TooFewDevices, demand
from fedbench.server.run import LoopState
from tests.helpers import task_identity
from tests.server.fakes import Recorder, build_loop, device, spec, weights

APP = Path(__file__).parents[1] / "apps" / "quickstart"
ARRAYS = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})

# Every strategy of flwr.serverapp.strategy that samples nodes itself and averages model
# arrays (the DP wrappers delegate to the strategy they wrap; FedXgb* aggregate trees).
SAMPLING = [
    cls
    for _, cls in inspect.getmembers(flower, inspect.isclass)
    if issubclass(cls, FedAvg) and not cls.__name__.startswith("FedXgb")
]
REQUIRED = {"QFedAvg": {"client_learning_rate": 0.1}}  # arguments without a default


def _strategy(cls: type[FedAvg], **settings: int) -> FedAvg:
    return cls(**settings, **REQUIRED.get(cls.__name__, {}))  # type: ignore[arg-type]


def test_strategy_start_still_takes_the_arguments_capture_binds() -> None:
    names = list(inspect.signature(Strategy.start).parameters)
    missing = [n for n in START_ARGUMENTS if n not in names]
    assert not missing, (
        f"Flower's Strategy.start no longer takes {missing} (it takes {names}); "
        "fedbench.server.capture binds them by name to learn what a user's ServerApp starts"
    )


def test_capture_reads_what_the_apps_server_app_hands_strategy_start() -> None:
    task_identity()  # Flower stamps the messages it builds
    app = load_app(str(APP), {})
    captured = capture(app, num_devices=4)
    assert isinstance(captured.strategy, FedAvg)
    assert captured.num_rounds == 3
    assert dict(captured.train_config) == {"lr": 0.05}  # the app's config, no strategy key
    assert captured.arrays_key == "arrays" and "fc1.weight" in captured.arrays
    assert Strategy.start.__qualname__ == "Strategy.start"  # Flower's own method, put back


@pytest.mark.parametrize("cls", SAMPLING, ids=lambda c: c.__name__)
def test_a_strategy_reads_the_node_ids_twice_per_configure(cls: type[FedAvg]) -> None:
    strategy = _strategy(cls, min_available_nodes=2, min_train_nodes=2)
    offer = Offer([0, 1, 2])
    messages = list(strategy.configure_train(1, ARRAYS, ConfigRecord(), offer))
    assert messages, f"{cls.__name__} sent nothing to an offer of 3 nodes"
    assert offer.asked == ASKS_PER_CONFIGURE, (
        f"Flower's {cls.__name__}.configure_train read grid.get_node_ids() {offer.asked} times "
        f"(fedbench.server.offer.ASKS_PER_CONFIGURE = {ASKS_PER_CONFIGURE}): an Offer with "
        "patience would take a normal configure for a wait"
    )


@pytest.mark.parametrize("cls", SAMPLING, ids=lambda c: c.__name__)
def test_demand_is_what_a_strategy_waits_for(cls: type[FedAvg]) -> None:
    strategy = _strategy(cls, min_available_nodes=3, min_train_nodes=2)
    assert demand(strategy) == 3
    # With the demand offered it does not wait; with one fewer it asks again (waits).
    list(strategy.configure_train(1, ARRAYS, ConfigRecord(), Offer([0, 1, 2])))
    short = Offer([0, 1], patience=ASKS_PER_CONFIGURE)
    done = threading.Event()

    def configure() -> None:
        try:
            list(strategy.configure_train(1, ARRAYS, ConfigRecord(), short))
        except TooFewDevices:
            done.set()

    worker = threading.Thread(target=configure, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done.is_set(), (
        f"Flower's {cls.__name__} offered fewer nodes than min_available_nodes did not read "
        "grid.get_node_ids() again (its wait for nodes changed): fedbench.server.offer "
        "detects that wait by the third read"
    )


class _Waits(FedAvg):
    """A strategy that names no minimum setting and waits for 5 nodes all the same."""

    def __init__(self) -> None:
        super().__init__(fraction_evaluate=0.0)
        del self.min_available_nodes, self.min_train_nodes

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        while len(list(grid.get_node_ids())) < 5:
            pass  # no sleep: only the offer's patience ends this wait
        return super().configure_train(server_round, arrays, config, grid)


def test_a_strategy_without_minimum_settings_is_offered_with_patience() -> None:
    assert demand(_Waits()) is None
    hook = Recorder()
    loop, grid, _ = build_loop({"a": device(1.0), "b": device(1.0)}, k=2, algorithm=_Waits())
    loop.hooks.append(hook)
    after = loop.run_round(spec(1), LoopState(0, 0.0, 0, weights(0.0)))
    assert not grid.sent and after.model_version == 0
    assert "waits for more than the 2 device(s)" in hook.outcomes[0].skipped  # type: ignore[attr-defined]
