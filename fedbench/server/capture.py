"""What a user's ServerApp would start with: its model, strategy, rounds and evaluation.

A Flower app's ServerApp builds its initial model and a strategy and calls
`strategy.start(grid, initial_arrays, num_rounds, train_config, ...,
evaluate_fn)`. fedbench runs its own round loop instead (selection, the
virtual clock, the records), so it runs the app's ServerApp once against a
`CaptureGrid` that stops it at its first send: the messages give the initial
weights and the train config, and the frame of `Strategy.start` (a read of
Flower's public method, not a change to it) gives the strategy object,
`num_rounds` and `evaluate_fn`. An app whose ServerApp sends no training
round cannot be run (a clear error says so).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import FrameType

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


class _Stop(BaseException):
    """Raised inside the app's ServerApp at its first send (BaseException: apps catch Exception)."""

    def __init__(self, messages: list[Message], start: FrameType | None) -> None:
        super().__init__("captured")
        self.messages = messages
        self.start = start


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
        raise _Stop(list(messages), _start_frame())

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return []

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        raise _Stop(list(messages), _start_frame())


def _start_frame() -> FrameType | None:
    """The frame of Flower's `Strategy.start` that is sending, if any."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is Strategy.start.__code__:
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


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
    try:
        server_app(CaptureGrid(num_devices), context)
    except _Stop as stop:
        return _captured(app, stop)
    except Exception as exc:  # the app's own code (its model, data, evaluate_fn at round 0)
        raise app_failure(app.name, f"its ServerApp {app.serverapp!r}", exc) from None
    raise FedbenchError(
        f"app serverapp {app.serverapp!r} returned without sending a training round"
    )


def _captured(app: AppConfig, stop: _Stop) -> Captured:
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
    configs = list(content.config_records.values())
    train_config = ConfigRecord(dict(configs[0])) if configs else ConfigRecord()
    train_config.pop("server-round", None)  # the strategy sets it every round
    found = stop.start.f_locals if stop.start is not None else {}
    strategy = found.get("self")
    evaluate_config = found.get("evaluate_config")
    return Captured(
        arrays=arrays[0][1],
        arrays_key=arrays[0][0],
        train_config=train_config,
        strategy=strategy if isinstance(strategy, Strategy) else None,
        num_rounds=found.get("num_rounds"),
        evaluate_fn=found.get("evaluate_fn"),
        evaluate_config=evaluate_config
        if isinstance(evaluate_config, ConfigRecord)
        else ConfigRecord(),
    )
