"""The virtual clock: an event queue, not a running maximum.

Events are kept in time order (ties in the order they were scheduled);
`pop` advances the clock to the event it returns. Synchronous rounds
schedule a round's start (a day boundary in the daily scenario) and then
await every arrival of the round; asynchronous FL (fedbench.server.fedbuff)
lives on it: each device's arrival is an event, processed in virtual-time
order whatever order the host finished the training in.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(order=True, frozen=True)
class Event(Generic[T]):
    time_s: float
    seq: int  # scheduling order: the tie-break that keeps runs deterministic
    what: T = field(compare=False)


class EventClock(Generic[T]):
    def __init__(self, now_s: float = 0.0) -> None:
        self.now_s = now_s
        self._events: list[Event[T]] = []
        self._seq = itertools.count()

    def schedule(self, time_s: float, what: T) -> Event[T]:
        """An event at `time_s` (never before now: the past is closed)."""
        event = Event(max(time_s, self.now_s), next(self._seq), what)
        heapq.heappush(self._events, event)
        return event

    def peek(self) -> Event[T] | None:
        return self._events[0] if self._events else None

    def pop(self) -> Event[T]:
        """The earliest event; the clock moves to its time."""
        event = heapq.heappop(self._events)
        self.now_s = max(self.now_s, event.time_s)
        return event

    def advance(self, to_s: float) -> None:
        """Idle until `to_s` (e.g. the next day's start)."""
        self.now_s = max(self.now_s, to_s)

    def __len__(self) -> int:
        return len(self._events)
