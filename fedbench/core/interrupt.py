"""Ctrl-C and SIGTERM for a run whose rounds run on another thread than the signal's.

Under `runtime=simulation` Flower runs the ServerApp on a thread of its own and
Ray's fleet on the main thread, where Python delivers every signal. A
KeyboardInterrupt raised there stops the main thread inside Flower's thread
pool while the round loop goes on (the process hangs); SIGTERM met Ray's own
handler, which aborts the process and leaves summary.json saying "running".
So while the rounds run, the signal only asks (`requested`), the round loop
looks (`check`) between polls for replies and between rounds, and the run
ends there as `interrupted`, its summary, figures and checkpoint written.

A second signal before the run has ended stops the process at once
(`os._exit`), as Ctrl-C twice does elsewhere, and takes the processes it
started with it (Ray's agents outlive a driver that exits without shutting
Ray down). Raised as a KeyboardInterrupt on the main thread, the second
signal stopped Flower's fleet loop there, and the process then hung at exit
joining the fleet's threads, blocked in `ray.get`. What
the rounds wrote stays (rounds.csv is written round by round, the checkpoint
after each round); `resume=` continues the folder, as after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import psutil

_requested = threading.Event()
_why: list[str] = []
EXIT_CODE = 130  # the shell's code for Ctrl-C; runtime=deployment's for either signal


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
        for s in signums:
            signal.signal(s, at_once)

    clear()
    for s in signums:
        signal.signal(s, ask)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        clear()


def at_once(signum: int, frame: FrameType | None) -> None:
    """A second signal: end the process now (module docstring).

    os.write, not print or logging: the handler runs between two bytecodes of
    the main thread, which may be inside a write to the same stream.
    """
    name = signal.Signals(signum).name
    os.write(
        2,
        f"[fedbench] second {name}: stopping at once; the run folder keeps every "
        "finished round (resume=<folder> continues it)\n".encode(),
    )
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
    os._exit(EXIT_CODE)
