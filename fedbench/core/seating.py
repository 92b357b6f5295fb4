"""Which Flower node carries a fleet device's message: the interface.

A runtime (fedbench.runtime) says where devices run; the server's strategy
wrapper routes each device's message to the node its runtime's `Seating`
names. The implementations (a pool of worker nodes, a node per device) are
in fedbench.runtime.seating.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class Seating(ABC):
    @abstractmethod
    def node_for(self, device: int, slot: int) -> int:
        """The node that trains `device`, the `slot`-th device (or call) of the round."""

    def devices_per_call(self, devices: int) -> int:
        """How many of a round's `devices` one message (one worker call) carries."""
        return 1
