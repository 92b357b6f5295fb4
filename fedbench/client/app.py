"""The ClientApp every fedbench node runs: fedbench's own, or the user's, under the mods.

`app` looks at the experiment a message carries: without `app=` it is
fedbench's train handler (fedbench.client.handler) under the fault mod and
the declared device mod; with `app=` it is the user's ClientApp, loaded
once per worker from its module (the app's folder, or the bundle Flower
installed), under the fault mod and the watching device mod. The user's
app is never edited: it is called as Flower would call it.

`seat_app(client_app)` is the same composition for a ClientApp object, for
users who build their own runner: `app = seat_app(their_app)`.

A worker that has had no call for `heap.IDLE_S` gives the memory its calls freed back
to the OS (`ReleaseMod`), so it waits for the next round holding only what is live;
between calls that follow each other it keeps it, so the next call does not page it in
again (fedbench.runtime.heap says why this and not a fixed mmap threshold or a release
after every call).
"""

from __future__ import annotations

import functools

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable

from fedbench.client import handler
from fedbench.client.faults import fault_mod
from fedbench.client.group import group_mod
from fedbench.client.mod import DeclaredDeviceMod, device_mod
from fedbench.client.seat import seat_of
from fedbench.experiment.app import AppConfig
from fedbench.runtime import heap

_own = ClientApp(mods=[fault_mod, DeclaredDeviceMod()])
_own.train()(handler.train)


def seat_app(client_app: ClientApp) -> ClientApp:
    """`client_app` as a fleet device: faults, then the device mod, then the app itself."""
    seated = ClientApp()

    def through(msg: Message, context: Context) -> Message:
        return client_app(msg, context)

    seated.train(mods=[fault_mod, device_mod])(through)
    seated.evaluate(mods=[device_mod])(through)
    seated.query(mods=[device_mod])(through)
    return seated


@functools.lru_cache(maxsize=4)
def _user_app(app: AppConfig) -> ClientApp:
    return seat_app(app.load(app.clientapp, ClientApp, "clientapp"))


def _dispatch(msg: Message, context: Context) -> Message:
    seat = seat_of(msg, context)
    target = _own if seat is None or seat.experiment.app is None else _user_app(seat.experiment.app)
    return target(msg, context)


class ReleaseMod:
    """The device's call; once the worker is idle after it, its freed memory back to the OS."""

    def __init__(self, idle_s: float = heap.IDLE_S) -> None:
        self.heap = heap.IdleRelease(idle_s)

    def __call__(self, msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
        self.heap.busy()
        try:
            return call_next(msg, context)
        finally:
            self.heap.idle()


release_mod = ReleaseMod()

# Outermost: a message for several devices becomes one call per device (group_mod),
# each followed by a release of what it freed once the worker has nothing more to do.
app = ClientApp(mods=[group_mod, release_mod])
app.train()(_dispatch)
app.evaluate()(_dispatch)
app.query()(_dispatch)
