"""Ctrl-C and SIGTERM for a run whose rounds run on another thread than the signal's.

Under `runtime=simulation` Flower runs the ServerApp on a thread of its own and
Ray's fleet on the main thread, where Python delivers every signal. A
KeyboardInterrupt raised there stops the main thread inside Flower's thread
pool while the round loop goes on (the process hangs); SIGTERM met Ray's own
handler, which aborts the process and leaves summary.json saying "running".
So while the rounds run, the signal only asks (`requested`), the round loop
looks (`check`) between polls for replies and between rounds, and the run
ends there as `interrupted`, its summary, figures and checkpoint written.

A second signal before the run has ended stops the process quickly
(`os._exit`), as Ctrl-C twice does elsewhere, and takes the processes it
started with it (Ray's agents outlive a driver that exits without shutting
Ray down). Raised as a KeyboardInterrupt on the main thread, the second
signal stopped Flower's fleet loop there, and the process then hung at exit
joining the fleet's threads, blocked in `ray.get`. It first waits, at most
ENDING_WAIT_S, for the round loop to write the run's ending (`ended`: the
summary says `interrupted`; the first signal asked for it, and the loop looks
every 50 ms while it waits for replies); it skips the figures and Ray's
shutdown. Should the ending not come in time, the runtime's `last_words`
mark the summary interrupted instead. What the rounds wrote stays (rounds.csv
is written round by round, the checkpoint after each round); `resume=`
continues the folder.

`signals_interrupt_then_hurry` is the same for a driver whose run lives in
other processes (runtime=deployment): the first signal raises
KeyboardInterrupt, so the `finally` that stops every process runs; a second
one, or any once that stop has begun, only hurries it (`Stopping.hurry`):
it neither kills the driver half-way (SIGTERM's default) nor breaks off its
stop (a KeyboardInterrupt inside it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

import psutil

_requested = threading.Event()
_ended = threading.Event()  # the run's ending (its summary) is written
_exiting = threading.Event()  # a second signal is ending the process
_why: list[str] = []
_last_words: list[Callable[[], object]] = []  # what a second signal does when no ending came
_cleanups: list[Callable[[], object]] = []  # what a second signal does after the kill
EXIT_CODE = 130  # the shell's code for Ctrl-C; runtime=deployment's for either signal
ENDING_WAIT_S = 5.0  # how long a second signal waits for the run's ending to be written
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterrupted(KeyboardInterrupt):
    """The run was asked to stop (a signal to the process); raised in the round loop."""


def request(why: str) -> None:
    """Ask the round loop to stop at its next check."""
    _why[:] = [why]
    _requested.set()


def clear() -> None:
    """Forget a stop asked for (the run that was asked has ended)."""
    _requested.clear()
    _ended.clear()


def ended() -> None:
    """The run's ending is written (summary.json): a second signal need not wait for it."""
    _ended.set()


def check() -> None:
    """Raise RunInterrupted if a stop was asked for."""
    if _requested.is_set():
        raise RunInterrupted(_why[0] if _why else "interrupted")


@contextlib.contextmanager
def signals_ask_to_stop(
    last_words: Callable[[], object] | None = None,
    cleanup: Callable[[], object] | None = None,
    signums: tuple[int, ...] = SIGNALS,
) -> Iterator[None]:
    """Within it, the first of these signals asks the round loop to stop (`request`).

    A second one ends the process (`at_once`): `last_words` runs first if the run's
    ending was not written by then, `cleanup` once the processes it started are
    killed. Only from the main thread (where Python runs signal handlers); elsewhere
    a no-op.
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
    _last_words[:] = [last_words] if last_words is not None else []
    _cleanups[:] = [cleanup] if cleanup is not None else []
    for s in signums:
        signal.signal(s, ask)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        clear()
        _last_words.clear()
        _cleanups.clear()


def at_once(signum: int, frame: FrameType | None) -> None:
    """A second signal: end the process now (module docstring).

    os.write, not print or logging: the handler runs between two bytecodes of
    the main thread, which may be inside a write to the same stream.
    """
    name = signal.Signals(signum).name
    if _exiting.is_set():
        os._exit(EXIT_CODE)  # a third signal, while this one waits: now
    _exiting.set()
    os.write(
        2,
        f"[fedbench] second {name}: stopping at once; the run is interrupted and its "
        "folder keeps every finished round (resume=<folder> continues it)\n".encode(),
    )
    # The round loop looks every 50 ms (the first signal asked it to stop): its
    # ending, summary included, is written in a moment, without the figures.
    if not _ended.wait(ENDING_WAIT_S):
        for words in _last_words:
            with contextlib.suppress(Exception):
                words()
    # Cleaned up before the kill and again after, never waiting in between: once Ray's
    # processes are gone, Ray's core worker in this process ends it itself (code 1).
    _clean_up()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
    _clean_up()
    os._exit(EXIT_CODE)


def _clean_up() -> None:
    for clean in _cleanups:
        with contextlib.suppress(Exception):
            clean()


@dataclass
class Stopping:
    """A driver's stop by signal (signals_interrupt_then_hurry): `hurry` once asked twice."""

    hurry: threading.Event = field(default_factory=threading.Event)
    installed: bool = False  # the handlers are in place (main thread only)

    def begun(self) -> None:
        """The stop has begun (the driver's `finally`): from here a signal only hurries it."""
        if self.installed:
            for s in SIGNALS:
                signal.signal(s, self._hurried)

    def _hurried(self, signum: int, frame: FrameType | None) -> None:
        if not self.hurry.is_set():
            name = signal.Signals(signum).name
            os.write(
                2,
                f"[fedbench] {name} while stopping: ending the processes now, as soon as "
                "the run's summary is written\n".encode(),
            )
        self.hurry.set()


@contextlib.contextmanager
def signals_interrupt_then_hurry() -> Iterator[Stopping]:
    """SIGINT or SIGTERM raises KeyboardInterrupt once; later ones set `hurry`.

    For a driver whose `finally` stops the processes it started: the first signal
    ends its work there; a second one, or any once `Stopping.begun()` was called,
    says so on stderr and sets `hurry`, which that stop reads (it waits less).
    Only from the main thread; elsewhere nothing is installed.
    """
    stopping = Stopping()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}

    def first(signum: int, frame: FrameType | None) -> None:
        stopping.begun()
        raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")

    for s in SIGNALS:
        signal.signal(s, first)
    stopping.installed = True
    try:
        yield stopping
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
