"""Does a user's ServerApp start? Its `main` run up to its first send, before the run.

Preflight (fedbench.preflight) runs the app's ServerApp once on a
`FirstSendGrid`: a Grid with `num_nodes` nodes that stops the app at its
first send. The app builds its model, its strategy and its data, and
`Strategy.start` scores the initial model with the app's `evaluate_fn`, as
in the run; an app that fails there is one line before any run folder
exists, rather than a failed run. Nothing of Flower's is patched: the grid
is Flower's public interface, and the task identity a Message is stamped
with (which only Flower's runtimes set) is set through its public setters
for the call and put back after.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from flwr.app import Context, Message, RecordDict
from flwr.serverapp import ServerApp
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from fedbench.errors import FedbenchError
from fedbench.experiment.app import AppConfig, app_failure
from fedbench.server.fleet_grid import MessageGrid

# A strategy of flwr.serverapp.strategy that wants more nodes than it is offered asks for the
# node ids once a second until they come (sample_nodes); Flower's legacy layer asks several
# times to configure a round, quickly. Asks that go on this long before a send are a wait.
WAITING_AFTER = 8  # asks
WAITING_S = 6.0  # seconds since the first of them


class Asks:
    """Counts the node-id asks since the last send: `wait()` says when they are a wait."""

    def __init__(self) -> None:
        self.count = 0
        self.since = 0.0

    def wait(self) -> bool:
        if self.count == 0:
            self.since = time.monotonic()
        self.count += 1
        return self.count > WAITING_AFTER and time.monotonic() - self.since > WAITING_S

    def reset(self) -> None:
        self.count = 0


class TooFewNodes(FedbenchError):
    def __init__(self, app: str, offered: int) -> None:
        super().__init__(
            f"app {app}: its strategy waits for more than the {offered} node(s) fedbench "
            "offers a round "
            f"(strategy.clients_per_round={offered}); give strategy.clients_per_round at least "
            "its min_available_nodes / min_train_nodes"
        )


class _FirstSend(BaseException):
    """Raised inside the app's ServerApp at its first send (BaseException: apps catch Exception)."""

    def __init__(self, messages: list[Message]) -> None:
        super().__init__("first send")
        self.messages = messages


@contextmanager
def _task_identity() -> Iterator[None]:
    """Outside Flower's runtimes a Message cannot be built without a run id: set one."""
    try:
        saved = (TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id)
    except RuntimeError:  # not set: preflight runs before any runtime
        saved = None
    if saved is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 0, 0, 0
    try:
        yield
    finally:
        if saved is None:  # as it was: unset
            TaskIdentity.task_id = TaskIdentity.run_id = TaskIdentity.node_id = None  # type: ignore[assignment]


class FirstSendGrid(MessageGrid):
    """A grid with `num_nodes` nodes that stops the app (named `app`) at its first send."""

    def __init__(self, num_nodes: int, app: str) -> None:
        self.num_nodes = num_nodes
        self.app = app
        # Flower's legacy layer reads grid.run.run_id (an empty run is what it needs).
        self._run: object = Run.create_empty(run_id=0)
        self.asks = Asks()
        self.thread = threading.get_ident()
        self.sent: list[Message] | None = None

    def set_run(self, run: object) -> None:  # type: ignore[override]
        self._run = run

    @property
    def run(self) -> object:  # type: ignore[override]
        return self._run

    def get_node_ids(self) -> Iterable[int]:
        # Flower's legacy layer also polls from a thread of its own: the app's asks count.
        mine = threading.get_ident() == self.thread
        if mine and self.sent is not None:  # a legacy app that sent from a worker thread
            raise _FirstSend(self.sent)
        if mine and self.asks.wait():
            raise TooFewNodes(self.app, self.num_nodes)
        return range(1, self.num_nodes + 1)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        # Flower's legacy layer pushes from its own threads, which catch this: the app's
        # thread stops at its next ask, and `sent` keeps what came first.
        self.sent = self.sent or list(messages)
        raise _FirstSend(self.sent)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return []

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        self.sent = self.sent or list(messages)  # also from the legacy layer's threads
        raise _FirstSend(self.sent)


def load_server_app(app: AppConfig) -> ServerApp:
    if app.serverapp is None:
        raise FedbenchError(
            f"app={app.root}: its pyproject.toml names no serverapp; fedbench runs the app's "
            "ServerApp (add [tool.flwr.app.components] serverapp)"
        )
    return app.load(app.serverapp, ServerApp, "serverapp")


@contextmanager
def working_directory(folder: Path) -> Iterator[None]:
    """The app's relative paths (results.json, outputs/, checkpoints) inside `folder`.

    The server's own writers hold absolute paths (fedbench.server.app resolves
    the run folder first); the ClientApps run in processes of their own.
    """
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def first_send(app: AppConfig, num_devices: int) -> list[Message]:
    """Run the app's ServerApp up to its first send; the messages it sends first."""
    server_app = load_server_app(app)
    context = Context(
        run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config=dict(app.run_config)
    )
    grid = FirstSendGrid(num_devices, app.name)
    # What the app writes on its way (a legacy app goes on past a failed send) is not the
    # user's: it goes to a folder that is removed after.
    with (
        _task_identity(),
        tempfile.TemporaryDirectory() as scratch,
        working_directory(Path(scratch)),
    ):
        try:
            server_app(grid, context)
        except _FirstSend as stop:
            return stop.messages
        except TooFewNodes as exc:  # fedbench's refusal, raised inside the app's call
            raise exc from None
        except Exception as exc:  # the app's own code (its model, data, evaluate_fn at round 0)
            if grid.sent is None:
                where = f"its ServerApp {app.serverapp!r}"
                raise app_failure(app.name, where, exc, app.root) from None
    if grid.sent is not None:
        return grid.sent
    raise FedbenchError(f"app serverapp {app.serverapp!r} returned without sending a message")
