"""The Grid a user's ServerApp runs its own loop on: the fleet, as fedbench runs it.

A Flower app's ServerApp gets a `flwr.serverapp.Grid` and drives its rounds
through it: its strategy samples from `get_node_ids()` and sends with
`send_and_receive` (or `push_messages` / `pull_messages`). `FleetGrid` is
that Grid, and it is where fedbench acts (fedbench.server.app_loop):

- `get_node_ids()` lists the devices fedbench's selector picked for the
  round, one node id per device (`device index + 1`): the app's strategy
  says how many and what, fedbench's selector says which;
- a send reaches each device through the runtime's real Grid, under the
  device mod; the round-close policy, the virtual clock and the records act
  on the replies, and the app gets the replies the round accepted, each from
  its device's node id and as the app's ClientApp wrote it.

The grid forwards to one `Exchanges` object and does nothing else. Its own
ids for the app's messages are fresh uuids (Flower's grids give every pushed
message one); nothing of Flower's is written but through public constructors.
A failure of fedbench's (a hook, the runtime) or a stop (a target reached,
the schedule over, a signal) reaches the app as a BaseException, which an app
that catches `Exception` cannot swallow, and the loop re-raises what it was.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from flwr.app import ArrayRecord, Message, RecordDict
from flwr.serverapp import Grid

T = TypeVar("T")


class Exchanges(Protocol):
    def node_ids(self) -> list[int]:
        """The node ids of the devices the app may address now."""

    def exchange(
        self, pairs: list[tuple[str, Message]], timeout: float | None, answer_all: bool
    ) -> list[Message]:
        """Send (id, message) pairs; the replies the round accepted, each replying to its id
        (`answer_all`: and an error reply for every other message, so no poller waits)."""


# Flower's legacy layer pushes each client's message from a thread of its own and polls
# for its reply: pushes that come within this many seconds of each other are one exchange.
QUIET_S = 0.2
# How the error reply of a device the round did not wait for begins (Flower's own grid
# gives no reply at all for it in send_and_receive).
CUT = "fedbench: the round closed without this reply: "


# What an app's strategy computed on the server, by kind (initial, train, federated,
# central), handed to the loop (fedbench.server.app_metrics reads a user app's from its log).
Logged = Callable[[str, Mapping[str, float]], None]
# What an app logs as its server-side evaluation begins (no numbers): the round's
# aggregate is made, so its host time ends there (AppLoop).
EVALUATING = "evaluating"


class FleetApp(Protocol):
    """A ServerApp as the round loop runs it on a FleetGrid: fedbench's own or a user's."""

    @property
    def name(self) -> str:
        """How errors name the app."""

    @property
    def own(self) -> bool:
        """fedbench's own app: its FleetStrategy aggregates the round's clean updates
        (the defense's, in the model's dtypes) and keeps the aggregate, and a round it
        sends nothing is a round that trained nobody. A user app's strategy reads its
        ClientApp's replies as written."""

    def run(self, grid: FleetGrid, initial: ArrayRecord, rounds: int, logged: Logged) -> None:
        """Run the app's loop on `grid`: `rounds` rounds from the model `initial`."""


class GridStop(BaseException):
    """Unwinds the app's ServerApp; `FleetGrid.raised` says why."""


class RunOver(Exception):
    """The run is over before the app's loop is (the schedule's last round, a hook's stop)."""


def reraise(grid: FleetGrid) -> None:
    """What fedbench raised in the grid, as itself (the run being over is no failure)."""
    if grid.raised is not None and not isinstance(grid.raised, RunOver):
        raise grid.raised


class MessageGrid(Grid):
    """A Grid whose messages are Flower's own, built by the public constructor."""

    def create_message(  # type: ignore[override]
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        return Message(
            content, dst_node_id=dst_node_id, message_type=message_type, ttl=ttl, group_id=group_id
        )


class FleetGrid(MessageGrid):
    def __init__(self, exchanges: Exchanges, inner: Grid) -> None:
        self.exchanges = exchanges
        self.inner = inner  # the runtime's grid: its run
        self.raised: BaseException | None = None  # what ended the app, if fedbench did
        self._queued: list[tuple[str, Message]] = []  # pushed, not yet exchanged
        self._queued_at = 0.0
        self._replies: dict[str, Message] = {}  # exchanged, not yet pulled
        # Flower's legacy layer polls node ids, pushes and pulls from threads of its own.
        self._cv = threading.Condition(threading.RLock())
        self.thread = threading.get_ident()  # the app's ServerApp runs in this one

    def set_run(self, run: object) -> None:  # type: ignore[override]
        self.inner.set_run(run)  # type: ignore[arg-type]

    @property
    def run(self) -> object:  # type: ignore[override]
        return self.inner.run

    def get_node_ids(self) -> Iterable[int]:
        with self._cv:
            return self._call(self.exchanges.node_ids)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Queued: the exchange runs at the first pull, once the pushes have settled."""
        pairs = [(uuid.uuid4().hex, m) for m in messages]
        with self._cv:
            self._queued.extend(pairs)
            self._queued_at = time.monotonic()
        return [i for i, _ in pairs]

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        ids = list(message_ids)
        with self._cv:
            waiting = {i for i, _ in self._queued}
            if any(i in waiting for i in ids):
                self._flush()
            return [self._replies.pop(i) for i in ids if i in self._replies]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        pairs = [(uuid.uuid4().hex, m) for m in messages]
        if threading.get_ident() == self.thread:  # the app's loop: one exchange
            with self._cv:
                return self._call(lambda: self.exchanges.exchange(pairs, timeout, False))
        # Flower's legacy layer sends each client's message from a thread of its own:
        # the messages of one stage, sent together, are one exchange.
        ids = self.push_messages([m for _, m in pairs])
        replies = self.pull_messages(ids)
        return [r for r in replies if not (r.has_error() and str(r.error.reason).startswith(CUT))]

    def _flush(self) -> None:
        """Exchange what was pushed, once no push came for QUIET_S (the lock is held)."""
        while (left := self._queued_at + QUIET_S - time.monotonic()) > 0:
            self._cv.wait(left)  # lets the other threads push
        batch, self._queued = self._queued, []
        if batch:
            replies = self._call(lambda: self.exchanges.exchange(batch, None, True))
            self._replies.update({r.metadata.reply_to_message_id: r for r in replies})

    def _call(self, what: Callable[[], T]) -> T:
        if self.raised is not None:  # the app called again after being stopped
            raise GridStop()
        try:
            return what()
        except GridStop:
            raise
        except BaseException as exc:  # fedbench's own: the app must not swallow it
            self.raised = exc
            raise GridStop() from exc
