"""What fedbench is doing, on the console and in the run folder's console.log.

`console.line(text)` prints one `[fedbench] text` line to stdout: what the
run is doing and what it gave. `console.warn(text)` (`[fedbench] warning:
text`) and `console.problem(text)` (a run or an analysis that failed) go to
stderr, so `2>/dev/null` keeps the run's story and `>/dev/null` keeps only
what went wrong.
`console.task(description, total, unit)` shows a piece of work as it goes:
a rich live progress bar on stderr when it is a terminal, otherwise a start line,
a line at each quarter (every 30 s when the size is unknown) and an end line
with the elapsed time (a log file or a CI console gets a few lines, not one
per step). `FEDBENCH_PROGRESS=plain`
(or `live`) overrides the terminal check.

`console.attach(run_dir)` keeps a transcript: from then on every line, the
tasks' plain lines and whatever else the process prints to stdout/stderr
are appended, time-stamped, to `run_dir/console.log` - so a run folder
says what its console said. A `console.log` that is a symbolic link is
refused, never written through (fedbench.folders). Attachments nest (a sweep's folder and the
current job's folder both get the job's lines); `detach()` ends the last.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

from fedbench.core.redact import redact_text, remember_process
from fedbench.folders import open_to_write

if TYPE_CHECKING:
    from rich.progress import Progress

PREFIX = "[fedbench]"
WARNING = f"{PREFIX} warning:"  # how console.warn starts a line (relays route on it)
LOG_NAME = "console.log"
ENV_MODE = "FEDBENCH_PROGRESS"  # plain | live; unset: live on a terminal
HEARTBEAT_S = 30.0  # a task of unknown size says how far it got this often (plain lines)


def elapsed(seconds: float) -> str:
    """4.2 s, 3 min 07 s, 1 h 02 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


class Task:
    """One piece of work with an optional known size (`total` in `unit`s)."""

    def __init__(
        self, console: Console, title: str, total: float | None, unit: str, start: float
    ) -> None:
        self.console = console
        self.title = title
        self.description = title
        self.total = total
        self.unit = unit
        self.completed = 0.0
        self.started = start
        self._quarter = 0  # quarters of `total` already announced
        self._said = start  # when the last plain line about this task was printed
        self._rich_id: int | None = None

    @property
    def _size(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None:
            return f"{_amount(self.completed)}{unit}" if self.completed else ""
        return f"{_amount(self.completed)}/{_amount(self.total)}{unit}"

    def advance(self, n: float = 1.0) -> None:
        self.completed += n
        self.console._advanced(self, n)
        now = self.console.clock()
        if self.total is None:
            # No quarters to announce: a line now and then, so a long task is not silent.
            if now - self._said >= HEARTBEAT_S:
                self._milestone(now, "")
            return
        if self.total < 4:
            return  # a few steps: the start and end lines say it all
        quarter = min(int(4 * self.completed / self.total), 3)
        if quarter > self._quarter:
            self._quarter = quarter
            self._milestone(now, f"{100 * self.completed / self.total:.0f}%, ")

    def _milestone(self, now: float, share: str) -> None:
        self._said = now
        detail = f" - {self.description}" if self.description != self.title else ""
        took = elapsed(now - self.started)
        self.console._plain(f"{self.title}: {self._size} ({share}{took}){detail}")

    def update(self, description: str) -> None:
        """What the task is doing now (shown live; in plain lines with the next milestone)."""
        self.description = description
        self.console._described(self)

    def _end_line(self, error: BaseException | None) -> str:
        took = elapsed(self.console.clock() - self.started)
        size = self._size
        if error is None:
            return (
                f"{self.title}: done, {size} in {took}" if size else f"{self.title}: done in {took}"
            )
        after = f"{size}, " if size else ""
        reason = (str(error).splitlines() or [""])[0]
        return f"{self.title}: stopped ({after}{took}): {type(error).__name__}: {reason}"


class _Tee(io.TextIOBase):
    """sys.stdout/sys.stderr while attached: the text goes on, complete lines also to the logs."""

    def __init__(self, console: Console, target: TextIO) -> None:
        self.console = console
        self.target = target
        self._partial = ""

    def write(self, text: str) -> int:
        shown = self.console._live_progress()
        if shown is not None and _isatty(self.target):
            # Above the live bar instead of through it (complete lines only).
            lines = (self._partial + text).split("\n")
            for line in lines[:-1]:
                shown.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self.target.write(text)
        pending = (self._partial + text).split("\n")
        self._partial = pending.pop()
        for line in pending:
            self.console._log(line)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return _isatty(self.target)

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Console:
    """fedbench's console: lines, tasks and the run folder's transcript (see the module)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._stream = stream  # None: sys.stderr at the time of writing (test capture works)
        self._live_setting = live
        self.clock = clock
        self._lock = threading.RLock()
        self._logs: list[tuple[Path, TextIO]] = []
        self._tasks: list[Task] = []
        self._progress: Progress | None = None
        self._saved: tuple[TextIO, TextIO] | None = None  # sys.stdout, sys.stderr before the tee

    # -- lines ---------------------------------------------------------------------------

    def line(self, text: str) -> None:
        """Print `[fedbench] text` to stdout (above a live bar) and append it to the logs."""
        self._line(f"{PREFIX} {text}", problem=False)

    def warn(self, text: str) -> None:
        """Print `[fedbench] warning: text` to stderr and append it to the logs."""
        self._line(f"{WARNING} {text}", problem=True)

    def problem(self, text: str) -> None:
        """Print `[fedbench] text` to stderr (something failed) and append it to the logs."""
        self._line(f"{PREFIX} {text}", problem=True)

    def _line(self, message: str, problem: bool) -> None:
        with self._lock:
            self._show(message, problem)
            self._log(message)

    def record(self, text: str) -> None:
        """Append `text` to the attached logs only (e.g. a traceback the console shows later)."""
        with self._lock:
            for line in text.rstrip("\n").splitlines():
                self._log(line)

    def _show(self, message: str, problem: bool = False) -> None:
        out = self._out(problem)
        if self._progress is not None and _isatty(out):
            # The bar's terminal: printed above the bar, not through it.
            self._progress.console.print(message, markup=False, highlight=False, soft_wrap=True)
            return
        out.write(message + "\n")
        out.flush()

    def _plain(self, text: str) -> None:
        """A task's plain line: shown unless a live bar shows the task, always logged."""
        message = f"{PREFIX} {text}"
        with self._lock:
            if self._progress is None:
                self._show(message)
            self._log(message)

    def _out(self, problem: bool = True) -> TextIO:
        """Where a line goes (`problem`: stderr, else stdout); the live bar is a problem's
        stream, stderr. A console made with a `stream` writes everything there."""
        stream = self._stream or (sys.stderr if problem else sys.stdout)
        return stream.target if isinstance(stream, _Tee) else stream  # type: ignore[return-value]

    # -- the transcript ------------------------------------------------------------------

    def attach(self, run_dir: Path) -> None:
        """Append every line from now on to run_dir/console.log (until `detach`)."""
        remember_process()  # `flwr-serverapp --token ...`: masked in every line logged
        with self._lock:
            run_dir.mkdir(parents=True, exist_ok=True)
            path = run_dir / LOG_NAME
            # Never through a link planted at the name: refused (fedbench.folders).
            handle = cast(TextIO, open_to_write(path, "a", buffering=1, encoding="utf-8"))
            self._logs.append((path, handle))
            self._tee_streams()

    def detach(self, run_dir: Path | None = None) -> None:
        """Stop the transcript of `run_dir` (default: the last attached)."""
        with self._lock:
            if not self._logs:
                return
            index = len(self._logs) - 1
            if run_dir is not None:
                wanted = run_dir / LOG_NAME
                index = next((i for i, (p, _) in enumerate(self._logs) if p == wanted), -1)
                if index < 0:
                    return
            _, handle = self._logs.pop(index)
            handle.close()
            if not self._logs:
                self._untee_streams()

    @property
    def attached(self) -> list[Path]:
        return [path for path, _ in self._logs]

    def _log(self, message: str) -> None:
        if not self._logs:
            return
        stamp = datetime.now().strftime("%H:%M:%S")
        line = redact_text(message.rstrip())  # a secret printed stays out of the file
        for _, handle in self._logs:
            handle.write(f"{stamp} {line}\n")

    def _tee_streams(self) -> None:
        if self._saved is not None or self._stream is not None:
            return  # already teed, or a console writing to its own stream (tests)
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(self, sys.stdout)  # type: ignore[assignment]
        sys.stderr = _Tee(self, sys.stderr)  # type: ignore[assignment]

    def _untee_streams(self) -> None:
        if self._saved is None:
            return
        # Only undo our own replacement: someone may have swapped the stream since.
        if isinstance(sys.stdout, _Tee) and sys.stdout.console is self:
            sys.stdout = self._saved[0]
        if isinstance(sys.stderr, _Tee) and sys.stderr.console is self:
            sys.stderr = self._saved[1]
        self._saved = None

    # -- tasks ---------------------------------------------------------------------------

    @contextmanager
    def task(self, description: str, total: float | None = None, unit: str = "") -> Iterator[Task]:
        """A piece of work shown while it runs (see the module docstring)."""
        handle = self.start_task(description, total, unit)
        try:
            yield handle
        except BaseException as exc:
            self.finish_task(handle, exc)
            raise
        self.finish_task(handle)

    def start_task(self, description: str, total: float | None = None, unit: str = "") -> Task:
        """`task` without the `with` (for callbacks that start and end in different calls)."""
        with self._lock:
            handle = Task(self, description, total, unit, self.clock())
            self._tasks.append(handle)
            if self._live():
                progress = self._progress or self._start_progress()
                handle._rich_id = int(progress.add_task(description, total=total, unit=unit))
            size = "" if total is None else f" ({_amount(total)}{' ' + unit if unit else ''})"
            self._plain(f"{description}: started{size}")  # the bar shows it live
            return handle

    def finish_task(self, handle: Task, error: BaseException | None = None) -> None:
        with self._lock:
            if handle not in self._tasks:
                return
            self._tasks.remove(handle)
            if self._progress is not None and handle._rich_id is not None:
                self._progress.remove_task(handle._rich_id)  # type: ignore[arg-type]
            if not self._tasks:
                self._stop_progress()
            self.line(handle._end_line(error))

    def _advanced(self, handle: Task, n: float) -> None:
        with self._lock:
            if self._progress is not None and handle._rich_id is not None:
                self._progress.update(handle._rich_id, advance=n)  # type: ignore[arg-type]

    def _described(self, handle: Task) -> None:
        with self._lock:
            if self._progress is not None and handle._rich_id is not None:
                self._progress.update(
                    handle._rich_id,  # type: ignore[arg-type]
                    description=f"{handle.title}: {handle.description}",
                )

    def _live(self) -> bool:
        if self._live_setting is not None:
            return self._live_setting
        mode = os.environ.get(ENV_MODE, "").lower()
        if mode in ("plain", "live"):
            return mode == "live"
        return _isatty(self._out()) and os.environ.get("TERM") != "dumb"

    def _live_progress(self) -> Progress | None:
        return self._progress

    def _start_progress(self) -> Progress:
        from rich.console import Console as RichConsole
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn(f"{PREFIX} {{task.description}}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=RichConsole(file=self._out(), stderr=True),
            transient=True,  # the end line stays; the bar goes
            redirect_stdout=False,  # the tee (attach) or nothing: see _Tee
            redirect_stderr=False,
        )
        self._progress.start()
        return self._progress

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


console = Console()
