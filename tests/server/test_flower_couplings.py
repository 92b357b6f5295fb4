"""What fedbench relies on in Flower, pinned: each test says what changed when it fails.

fedbench composes with Flower at its public seams only; two of them rest on
facts about Flower's behaviour rather than on an interface, and these tests
hold those facts (pyproject.toml states the Flower range they pass on):

- fedbench.server.app_metrics reads what an app's strategy computes on the
  server from the log calls of `Strategy.start` and the legacy DefaultWorkflow;
- fedbench.server.app_loop and fedbench.client.mod build and readdress messages
  with Flower's public Metadata and its `dst_node_id` setter;
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
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.server.workflow import default_workflows
from flwr.serverapp import Grid
from flwr.serverapp import strategy as flower
from flwr.serverapp.strategy import FedAvg, Strategy

from fedbench.experiment.app import load_app
from fedbench.server.app_metrics import LEGACY_CENTRAL, TEMPLATES, flower_metrics
from fedbench.server.capture import first_send
from fedbench.server.offer import ASKS_PER_CONFIGURE, Offer, TooFewDevices, demand
from fedbench.server.run import LoopState
from tests.helpers import task_identity
from tests.server.fakes import Recorder, SendOnlyGrid, build_loop, device, spec, weights

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


def test_first_send_runs_the_apps_server_app_up_to_its_first_training() -> None:
    task_identity()  # Flower stamps the messages it builds
    messages = first_send(load_app(str(APP), {}), num_devices=4)
    assert len(messages) == 4 and {m.metadata.message_type for m in messages} == {"train"}
    arrays = messages[0].content.array_records
    assert list(arrays) == ["arrays"] and "fc1.weight" in arrays["arrays"]
    assert Strategy.start.__qualname__ == "Strategy.start"  # Flower's own, never patched


def test_first_send_runs_an_app_where_no_flower_runtime_set_the_task_identity() -> None:
    """Preflight runs a user's ServerApp in the driver, where Flower set no TaskIdentity,
    yet Flower's Message reads it; the public setters set one and put it back unset."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity._task_id = TaskIdentity._run_id = TaskIdentity._node_id = None
    try:
        assert len(first_send(load_app(str(APP), {}), num_devices=4)) == 4
        assert TaskIdentity._run_id is None  # put back as it was found
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


class _Answering(Grid):
    """Replies to every message with what FedAvg aggregates (3 examples, accuracy 0.5)."""

    def set_run(self, run: object) -> None:  # type: ignore[override]
        pass

    @property
    def run(self) -> object:  # type: ignore[override]
        return None

    def create_message(self, *args: object, **kwargs: object) -> Message:  # type: ignore[override]
        raise NotImplementedError

    def get_node_ids(self) -> Iterable[int]:
        return [1, 2]

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        out = []
        for m in messages:
            content = RecordDict({"metrics": MetricRecord({"num-examples": 3, "accuracy": 0.5})})
            if m.metadata.message_type == "train":
                content["arrays"] = m.content.array_records["arrays"]
            out.append(Message(content, reply_to=m))
        return out


def test_strategy_start_logs_its_metric_records_as_app_metrics_reads_them() -> None:
    """fedbench.server.app_metrics reads an app strategy's aggregates and evaluate_fn
    results from Flower's log calls, by their templates and MetricRecord arguments."""
    task_identity()
    seen: list[tuple[str, dict[str, float]]] = []
    with flower_metrics(lambda kind, values: seen.append((kind, dict(values)))):
        FedAvg(fraction_evaluate=1.0, min_available_nodes=2).start(
            _Answering(),
            ArrayRecord({"arrays": Array(np.zeros(3, dtype=np.float32))}),
            num_rounds=1,
            evaluate_fn=lambda r, a: MetricRecord({"central_acc": 0.25 + r}),
        )
    assert [kind for kind, _ in seen] == ["initial", "aggregated", "aggregated", "central"], (
        f"Flower's Strategy.start no longer logs {TEMPLATES} as fedbench reads them: {seen}"
    )
    assert seen[0][1] == {"central_acc": 0.25} and seen[-1][1] == {"central_acc": 1.25}
    assert seen[2][1]["accuracy"] == 0.5  # the federated evaluation's aggregate


def test_the_legacy_workflow_logs_central_evaluation_as_app_metrics_reads_it() -> None:
    import logging

    from flwr.common.logger import FLOWER_LOGGER

    seen: list[tuple[str, dict[str, float]]] = []
    with flower_metrics(lambda kind, values: seen.append((kind, dict(values)))):
        FLOWER_LOGGER.log(logging.INFO, LEGACY_CENTRAL, 2, 0.75, {"central_acc": 0.5}, 3.0)
    assert seen == [("central", {"central_acc": 0.5, "loss": 0.75})]
    source = inspect.getsource(default_workflows)
    assert '"fit progress: (%s, %s, %s, %s)"' in source, (
        "Flower's DefaultWorkflow no longer logs its central evaluation as fedbench reads it"
    )
    assert '"initial parameters (loss, other metrics): %s, %s"' in source


def test_a_reply_can_be_built_from_public_metadata_and_a_message_readdressed() -> None:
    """fedbench.server.app_loop builds the app's replies with Flower's public Metadata and
    fedbench.client.mod gives an app's message its device's node id (a public setter)."""
    from flwr.app import Metadata

    task_identity()
    meta = Metadata(
        run_id=1,
        message_id="m",
        src_node_id=7,
        dst_node_id=1,
        reply_to_message_id="a",
        group_id="1",
        created_at=0.0,
        ttl=60.0,
        message_type="train",
    )
    reply = Message(metadata=meta, content=RecordDict())  # type: ignore[call-overload]
    assert reply.metadata.src_node_id == 7 and reply.metadata.reply_to_message_id == "a"
    sent = Message(RecordDict(), dst_node_id=5, message_type="train")
    sent.metadata.dst_node_id = 3
    assert sent.metadata.dst_node_id == 3


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

    def summary(self) -> None:
        """Flower's start() logs the settings this strategy deleted: nothing to log."""

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
    after = loop.run([spec(1)], LoopState(0, 0.0, 0, weights(0.0)))
    assert not grid.sent and after.model_version == 0
    assert "waits for more than the 2 device(s)" in hook.outcomes[0].skipped  # type: ignore[attr-defined]


class _Calls(Strategy):
    """Records what Flower's Strategy.start asks of a strategy, and in which order."""

    def __init__(self, log: list[str], new: ArrayRecord | None) -> None:
        self.log = log
        self.new = new

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        grid.get_node_ids()
        self.log.append(f"configure_train {server_round} {id(config)}")
        return [Message(RecordDict({"arrays": arrays}), dst_node_id=1, message_type="train")]

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        self.log.append(f"aggregate_train {server_round} {len(list(replies))}")
        return self.new, None

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self.log.append(f"configure_evaluate {server_round}")
        return []

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        self.log.append(f"aggregate_evaluate {server_round} {len(list(replies))}")
        return None

    def summary(self) -> None:
        self.log.append("summary")


class _Exchanges(SendOnlyGrid):
    """A grid that logs node-id asks and sends, and replies to every message."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def get_node_ids(self) -> Iterable[int]:
        self.log.append("nodes")
        return [1]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        sent = list(messages)
        self.log.append(f"send {len(sent)}")
        return [Message(RecordDict(), reply_to=m) for m in sent]


@pytest.mark.parametrize("aggregates", [True, False])
def test_strategy_start_runs_each_round_as_fedbenchs_own_app_expects(aggregates: bool) -> None:
    """fedbench.server.own_app runs its FleetStrategy through Flower's Strategy.start:

    - evaluate_fn(0, initial) before round 1 (the app scores nothing there: day 0 is
      the assembly's), then per round, numbered from 1 (a resume's FleetStrategy adds
      its first_round): configure_train with the same train config record every round
      (FleetStrategy copies it: strategies write into it) and the grid, whose node-id
      ask opens the round on the FleetGrid; one send_and_receive of its messages
      (the round's training, AppLoop._train); aggregate_train of exactly the replies it
      returned; configure_evaluate, a send of its messages even when there are none
      (AppLoop ends the round's asks there); aggregate_evaluate; evaluate_fn(round,
      model), the model the aggregate (None: the one sent) - the scores after a round;
    - the next round's configure_train comes after all of this (AppLoop records a round
      when the next one opens, or when start() returns).
    """
    task_identity()  # Flower's Message constructor reads the run's identity
    log: list[str] = []
    new = ArrayRecord({"w": Array(np.ones(2))}) if aggregates else None
    initial = ArrayRecord({"w": Array(np.zeros(2))})
    config = ConfigRecord({"lr": 0.1})

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        model = "new" if arrays is new else "initial" if arrays is initial else "other"
        log.append(f"evaluate_fn {server_round} {model}")
        return None

    _Calls(log, new).start(
        _Exchanges(log), initial, num_rounds=2, train_config=config, evaluate_fn=evaluate
    )
    after = "new" if aggregates else "initial"
    one_round = [
        "nodes",
        f"configure_train {{r}} {id(config)}",
        "send 1",
        "aggregate_train {r} 1",
        "configure_evaluate {r}",
        "send 0",
        "aggregate_evaluate {r} 0",
        f"evaluate_fn {{r}} {after}",
    ]
    expected = ["summary", "evaluate_fn 0 initial"]
    for r in (1, 2):
        expected += [line.format(r=r) for line in one_round]
    assert log == expected
