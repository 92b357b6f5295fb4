"""Ctrl-C and SIGTERM for a run whose rounds run on another thread than the signal's.

Under `runtime=simulation` Flower runs the ServerApp on a thread of its own and
Ray's fleet on the main thread, where Python delivers every signal. A
KeyboardInterrupt raised there stops the main thread inside Flower's thread
pool while the round loop goes on (the process hangs); SIGTERM met Ray's own
handler, which aborts the process and leaves summary.json saying "running".
So while the rounds run, the signal only asks (`requested`), the round loop
looks (`check`) between polls for replies and between rounds, and the run
ends there as `interrupted`, its summary, figures and checkpoint written. A
second signal is the previous handler's (Ctrl-C twice: at once).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_requested = threading.Event()
_why: list[str] = []


class RunInterrupted(KeyboardInterrupt):
    """The run was asked to stop (a signal to the process); raised in the round loop."""


def request(why: str) -> None:
    """Ask the round loop to stop at its next check."""
    _why[:] = [why]
    _requested.set()


def clear() -> None:
    """Forget a stop asked for (the run that was asked has ended)."""
    _requested.clear()


def check() -> None:
    """Raise RunInterrupted if a stop was asked for."""
    if _requested.is_set():
        raise RunInterrupted(_why[0] if _why else "interrupted")


@contextlib.contextmanager
def signals_ask_to_stop(
    signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[None]:
    """Within it, the first of these signals asks the round loop to stop (`request`).

    Only from the main thread (where Python runs signal handlers); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in signums}

    def ask(signum: int, frame: FrameType | None) -> None:
        request(f"{signal.Signals(signum).name} received")
        for s, handler in previous.items():  # a second signal: what it did before
            signal.signal(s, handler)

    clear()
    for s in signums:
        signal.signal(s, ask)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        clear()
