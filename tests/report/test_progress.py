"""The console: plain progress lines off a terminal, and the run folder's console.log."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from fedbench.report.progress import Console, elapsed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plain() -> tuple[Console, io.StringIO, Clock]:
    stream, clock = io.StringIO(), Clock()
    return Console(stream=stream, live=False, clock=clock), stream, clock


def test_a_task_prints_a_start_a_line_per_quarter_and_an_end() -> None:
    console, stream, clock = plain()
    with console.task("pretraining densenet40", total=12, unit="epochs") as task:
        for epoch in range(12):
            clock.now += 10.0
            task.update(f"epoch {epoch + 1}")
            task.advance()
    assert stream.getvalue().splitlines() == [
        "[fedbench] pretraining densenet40: started (12 epochs)",
        "[fedbench] pretraining densenet40: 3/12 epochs (25%, 30.0 s) - epoch 3",
        "[fedbench] pretraining densenet40: 6/12 epochs (50%, 1 min 00 s) - epoch 6",
        "[fedbench] pretraining densenet40: 9/12 epochs (75%, 1 min 30 s) - epoch 9",
        "[fedbench] pretraining densenet40: done, 12/12 epochs in 2 min 00 s",
    ]


def test_a_task_of_unknown_size_and_a_failed_one() -> None:
    console, stream, clock = plain()
    with console.task("measuring the workload") as task:
        clock.now = 4.25
        task.advance(3)
    with pytest.raises(RuntimeError), console.task("characterisation", 2, "steps"):
        clock.now = 5.0
        raise RuntimeError("device lost\nsecond line")
    assert stream.getvalue().splitlines()[1:] == [
        "[fedbench] measuring the workload: done, 3 in 4.2 s",
        "[fedbench] characterisation: started (2 steps)",
        "[fedbench] characterisation: stopped (0/2 steps, 0.8 s): RuntimeError: device lost",
    ]


def test_a_long_task_of_unknown_size_says_how_far_it_got_now_and_then() -> None:
    console, stream, clock = plain()
    with console.task("batch_sweep on rpi4", unit="steps") as task:
        for step in range(10):
            clock.now += 9.0  # 90 s in all: a line after 36 s and after 72 s
            task.update(f"densenet40 @ batch {2**step}")
            task.advance()
    assert stream.getvalue().splitlines()[1:] == [
        "[fedbench] batch_sweep on rpi4: 4 steps (36.0 s) - densenet40 @ batch 8",
        "[fedbench] batch_sweep on rpi4: 8 steps (1 min 12 s) - densenet40 @ batch 128",
        "[fedbench] batch_sweep on rpi4: done, 10 steps in 1 min 30 s",
    ]


def test_elapsed_reads_like_a_person_would_say_it() -> None:
    assert [elapsed(s) for s in (0.04, 59.96, 61, 3725)] == [
        "0.0 s",
        "60.0 s",
        "1 min 01 s",
        "1 h 02 min",
    ]


def test_attach_keeps_every_line_and_stray_prints_in_console_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    console = Console(live=False)
    before = (sys.stdout, sys.stderr)
    console.attach(tmp_path)
    console.line("day 1: accuracy 61.2%")
    print("a line from somewhere else")
    print("an error", file=sys.stderr)
    with console.task("rounds", 2, "rounds") as task:
        task.advance(2)
    console.record("Traceback (most recent call last):\n  ...")
    console.detach()
    print("after detach")
    log = (tmp_path / "console.log").read_text().splitlines()
    # Each line starts with the time of day.
    assert all(line[2] == ":" and line[5] == ":" for line in log)
    assert [line[9:] for line in log] == [
        "[fedbench] day 1: accuracy 61.2%",
        "a line from somewhere else",
        "an error",
        "[fedbench] rounds: started (2 rounds)",
        "[fedbench] rounds: done, 2/2 rounds in 0.0 s",
        "Traceback (most recent call last):",
        "  ...",
    ]
    shown = capsys.readouterr()
    assert "after detach" in shown.out and "a line from somewhere else" in shown.out
    assert "[fedbench] day 1: accuracy 61.2%" in shown.out  # what the run did: stdout
    assert (sys.stdout, sys.stderr) == before  # detach gave the streams back


def test_nested_attachments_each_get_their_lines(tmp_path: Path) -> None:
    console = Console(live=False)
    sweep, job = tmp_path / "sweep", tmp_path / "sweep" / "0"
    console.attach(sweep)
    console.line("job 1/2: seed=0")
    console.attach(job)
    console.line("day 1")
    console.detach(job)
    console.line("job 1/2 completed")
    console.detach(sweep)
    assert console.attached == []
    assert [line[9:] for line in (job / "console.log").read_text().splitlines()] == [
        "[fedbench] day 1"
    ]
    assert len((sweep / "console.log").read_text().splitlines()) == 3


def test_what_the_run_did_goes_to_stdout_and_what_went_wrong_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `2>/dev/null` keeps the run's story; `>/dev/null` keeps only its problems.
    console = Console(live=False)
    console.attach(tmp_path)
    console.line("day 1: accuracy 61.2%")
    with console.task("pretraining", 1, "epochs") as task:
        task.advance()
    console.warn("oort: the app reports no train_loss")
    console.problem("run failed (server): boom -> somewhere")
    console.detach()
    shown = capsys.readouterr()
    out = shown.out.splitlines()
    assert out[:2] == [
        "[fedbench] day 1: accuracy 61.2%",
        "[fedbench] pretraining: started (1 epochs)",
    ]
    assert len(out) == 3 and out[2].startswith("[fedbench] pretraining: done, 1/1 epochs in ")
    assert shown.err.splitlines() == [
        "[fedbench] warning: oort: the app reports no train_loss",
        "[fedbench] run failed (server): boom -> somewhere",
    ]
    # The transcript keeps both, in order.
    log = [line[9:] for line in (tmp_path / "console.log").read_text().splitlines()]
    assert log[-2:] == [shown.err.splitlines()[0], shown.err.splitlines()[1]]
