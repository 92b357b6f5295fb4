"""What a user's ServerApp would start with: its model, strategy, rounds and evaluation.

A Flower app's ServerApp builds its initial model and a strategy and calls
`strategy.start(grid, initial_arrays, num_rounds, timeout, train_config,
evaluate_config, evaluate_fn)`. fedbench runs its own round loop instead
(selection, the virtual clock, the records), so it runs the app's ServerApp
once, with two stops:

- while it runs, `Strategy.start` is wrapped: the wrapper binds the call's
  arguments to the method's documented signature (the strategy object,
  `num_rounds`, `train_config`, `evaluate_config`, `evaluate_fn`) and goes
  on into Flower's own `start` without the evaluation (fedbench evaluates
  the initial model itself);
- the grid is a `CaptureGrid` that stops the app at its first send: the
  messages give the initial weights, the ArrayRecord's name and, for an app
  that sends without `Strategy.start`, the train config.

Nothing of Flower's is read but its public signature, which
tests/server/test_flower_couplings.py pins. An app whose ServerApp sends no
training round cannot be run (a clear error says so).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Strategy

from fedbench.errors import FedbenchError
from fedbench.experiment.app import AppConfig, app_failure


@dataclass(frozen=True)
class Captured:
    arrays: ArrayRecord  # the initial global model
    arrays_key: str  # the ArrayRecord's name in the train messages
    train_config: ConfigRecord  # what the app sends with every round (e.g. lr)
    strategy: Strategy | None  # the strategy its ServerApp starts, if it uses Strategy.start
    num_rounds: int | None
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None
    evaluate_config: ConfigRecord


# The arguments of `Strategy.start` fedbench takes from an app, by their documented names.
START_ARGUMENTS = ("self", "num_rounds", "train_config", "evaluate_config", "evaluate_fn")


class _Stop(BaseException):
    """Raised inside the app's ServerApp at its first send (BaseException: apps catch Exception)."""

    def __init__(self, messages: list[Message]) -> None:
        super().__init__("captured")
        self.messages = messages


@contextmanager
def _start_arguments() -> Iterator[dict[str, Any]]:
    """While it is open, `Strategy.start` puts its bound arguments into the yielded dict.

    The call then goes on into Flower's own `start` (up to the first send, where
    the CaptureGrid stops it), without `evaluate_fn`: evaluating the initial
    model is the round loop's job, and an app's evaluation may take a while.
    """
    original = Strategy.start
    signature = inspect.signature(original)
    found: dict[str, Any] = {}

    def start(self: Strategy, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        found.update(bound.arguments)
        config = bound.arguments["train_config"]
        if isinstance(config, ConfigRecord):  # Flower's strategies write into the one they get
            found["train_config"] = ConfigRecord(dict(config))
        bound.arguments["evaluate_fn"] = None
        return original(*bound.args, **bound.kwargs)

    Strategy.start = start  # type: ignore[method-assign]
    try:
        yield found
    finally:
        Strategy.start = original  # type: ignore[method-assign]


class CaptureGrid(Grid):
    """A grid with `num_nodes` nodes that records the first messages and stops the app."""

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes

    def set_run(self, run: object) -> None:  # type: ignore[override]
        self._run = run

    @property
    def run(self) -> object:  # type: ignore[override]
        return getattr(self, "_run", None)

    def create_message(  # type: ignore[override]
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        return Message(content, dst_node_id=dst_node_id, message_type=message_type, ttl=ttl)

    def get_node_ids(self) -> Iterable[int]:
        return range(1, self.num_nodes + 1)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise _Stop(list(messages))

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return []

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        raise _Stop(list(messages))


def load_server_app(app: AppConfig) -> ServerApp:
    if app.serverapp is None:
        raise FedbenchError(
            f"app={app.root}: its pyproject.toml names no serverapp; fedbench needs it for the "
            "initial model (add [tool.flwr.app.components] serverapp)"
        )
    return app.load(app.serverapp, ServerApp, "serverapp")


def capture(app: AppConfig, num_devices: int) -> Captured:
    """Run the app's ServerApp up to its first training round and keep what it would send."""
    server_app = load_server_app(app)
    context = Context(
        run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config=dict(app.run_config)
    )
    with _start_arguments() as started:
        try:
            server_app(CaptureGrid(num_devices), context)
        except _Stop as stop:
            return _captured(app, stop, started)
        except Exception as exc:  # the app's own code (its model, data, evaluate_fn at round 0)
            raise app_failure(app.name, f"its ServerApp {app.serverapp!r}", exc) from None
    raise FedbenchError(
        f"app serverapp {app.serverapp!r} returned without sending a training round"
    )


def _captured(app: AppConfig, stop: _Stop, started: dict[str, Any]) -> Captured:
    train = [m for m in stop.messages if m.metadata.message_type.split(".")[0] == MessageType.TRAIN]
    if not train:
        raise FedbenchError(f"app serverapp {app.serverapp!r}: its first messages are not training")
    content = train[0].content
    arrays = list(content.array_records.items())
    if len(arrays) != 1:
        raise FedbenchError(
            f"app serverapp {app.serverapp!r}: a train message with {len(arrays)} ArrayRecords; "
            "fedbench aggregates exactly one model"
        )
    strategy = started.get("self")
    given = started.get("train_config")
    if isinstance(given, ConfigRecord):  # what the app hands Strategy.start: no strategy key yet
        train_config = ConfigRecord(dict(given))
    else:  # an app that sends by itself: its first message's config, less the round
        configs = list(content.config_records.values())
        train_config = ConfigRecord(dict(configs[0])) if configs else ConfigRecord()
        train_config.pop("server-round", None)
    evaluate_config = started.get("evaluate_config")
    return Captured(
        arrays=arrays[0][1],
        arrays_key=arrays[0][0],
        train_config=train_config,
        strategy=strategy if isinstance(strategy, Strategy) else None,
        num_rounds=started.get("num_rounds"),
        evaluate_fn=started.get("evaluate_fn"),
        evaluate_config=evaluate_config
        if isinstance(evaluate_config, ConfigRecord)
        else ConfigRecord(),
    )
