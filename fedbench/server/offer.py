"""The grid a wrapped Flower strategy sees: exactly the devices fedbench picked.

A Flower strategy samples nodes from `grid.get_node_ids()` and builds one
message per sampled node. `Offer` answers with the picked devices (as ids
`device index + 1`, since Flower treats node id 0 as none), so the wrapped
strategy's messages name devices; FleetStrategy then routes each to the
node that carries it. Nothing is sent through an Offer.

A strategy that wants more nodes than it is offered waits for them (Flower's
`sample_nodes` polls `get_node_ids` once a second), and an offer never grows.
`demand` reads how many a strategy waits for from its documented settings
(`min_available_nodes`, `min_train_nodes`: every strategy of
`flwr.serverapp.strategy` has them), so FleetStrategy skips such a round
before asking. A strategy without those settings is offered with `patience`:
Flower's strategies ask twice per configure (FedAvg.configure_train, then
sample_nodes), so a third ask is a wait, and `TooFewDevices` ends it; the
round trains nobody, with that reason recorded. Both facts about Flower are
pinned by tests/server/test_flower_couplings.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from flwr.app import Message
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

# How often a strategy of flwr.serverapp.strategy reads the node ids in one configure call.
ASKS_PER_CONFIGURE = 2
# The settings that say how many nodes a Flower strategy waits for before it samples.
MINIMUM_SETTINGS = ("min_available_nodes", "min_train_nodes")


class TooFewDevices(Exception):
    """The wrapped strategy needs more devices than the selector picked this round."""


def demand(strategy: Strategy) -> int | None:
    """The fewest nodes `strategy` samples from, by its settings; None if it names none."""
    values = [getattr(strategy, key, None) for key in MINIMUM_SETTINGS]
    known = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(known) if known else None


class Offer(Grid):
    def __init__(self, devices: Sequence[int], patience: int | None = None) -> None:
        """`patience`: the asks after which another one is a wait (None: never a wait)."""
        self.devices = [int(d) for d in devices]
        self.patience = patience
        self.asked = 0

    @staticmethod
    def device_of(message: Message) -> int:
        return int(message.metadata.dst_node_id) - 1

    def get_node_ids(self) -> Iterable[int]:
        self.asked += 1
        if self.patience is not None and self.asked > self.patience:
            raise TooFewDevices(
                f"the Flower strategy (algorithm=) waits for more than the {len(self.devices)} "
                "device(s) picked this round"
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
