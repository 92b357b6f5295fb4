"""The grid a wrapped Flower strategy sees: exactly the devices fedbench picked.

A Flower strategy samples nodes from `grid.get_node_ids()` and builds one
message per sampled node. `Offer` answers with the picked devices (as ids
`device index + 1`, since Flower treats node id 0 as none), so the wrapped
strategy's messages name devices; FleetStrategy then routes each to the
node that carries it. Nothing is sent through an Offer.

Flower's `sample_nodes` waits, polling once a second, until
`min_available_nodes` are connected; an offer never grows, so being asked
again after such a pause means the strategy wants more devices than were
picked this round: `TooFewDevices` ends the wait and the round trains
nobody, with that reason recorded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from flwr.app import Message
from flwr.serverapp import Grid


class TooFewDevices(Exception):
    """The wrapped strategy needs more devices than the selector picked this round."""


class Offer(Grid):
    def __init__(self, devices: Sequence[int]) -> None:
        self.devices = [int(d) for d in devices]
        self._last_asked: float | None = None

    @staticmethod
    def device_of(message: Message) -> int:
        return int(message.metadata.dst_node_id) - 1

    def get_node_ids(self) -> Iterable[int]:
        now = time.monotonic()
        waited = self._last_asked is not None and now - self._last_asked > 0.5
        self._last_asked = now
        if waited:  # the strategy slept, waiting for more nodes than there will ever be
            raise TooFewDevices(
                f"the Flower strategy (algorithm=) waits for more than the {len(self.devices)} "
                "device(s) picked this round (its min_available_nodes / min_train_nodes)"
            )
        return [d + 1 for d in self.devices]

    # An offer only lists devices; sending goes through the real grid.
    def set_run(self, run: object) -> None:  # type: ignore[override]
        raise NotImplementedError

    @property
    def run(self) -> object:  # type: ignore[override]
        raise NotImplementedError

    def create_message(self, *args: object, **kwargs: object) -> Message:  # type: ignore[override]
        raise NotImplementedError

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        raise NotImplementedError
