"""Issue 48, round two: a run folder is a place fedbench writes INTO, never THROUGH.

A run folder may come from someone else. A `run.lock` planted there as a
symbolic link made `resume=` overwrite the link's target with `PID timestamp`;
a `console.log` link in a pre-made `hydra.run.dir` had the run's whole log
appended to its target. Every file fedbench writes in a run folder is now opened
without following a link (fedbench.folders), and a folder holding one is
refused with one line, exit code 2. Each writer is tested in-process; the two
command lines of the finding run once each (tests.cli_runner: one interpreter
start for both).
"""

from __future__ import annotations

import io
import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.folders import check_no_links, make_folder, open_to_write, write_file

KEEP = "the victim's own text\n"
LINK = "is a symbolic link: fedbench writes into a run folder, never through a link in it"


def _plant(folder: Path, name: str, tmp_path: Path) -> Path:
    """`folder/name` -> a victim file outside the folder; the victim."""
    victim = tmp_path / f"victim-{name.replace('/', '-')}"
    victim.write_text(KEEP)
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(victim, folder / name)
    return victim


def _refused(error: pytest.ExceptionInfo[FedbenchError], path: Path) -> None:
    assert str(error.value) == (f"{path} {LINK}; remove the link, or give another run folder"), (
        error.value
    )


# --- the helper ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["a", "w", "ab", "wb", "r+b"])
def test_open_to_write_never_follows_a_link(tmp_path: Path, mode: str) -> None:
    victim = _plant(tmp_path, "file", tmp_path)
    with pytest.raises(FedbenchError) as error:
        open_to_write(tmp_path / "file", mode)
    _refused(error, tmp_path / "file")
    assert victim.read_text() == KEEP


def test_open_to_write_writes_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with open_to_write(path, "a", encoding="utf-8") as f:
        f.write("one\n")
    with open_to_write(path, "a", encoding="utf-8") as f:
        assert f.tell() == 4  # appending: at the end, as open("a") is
        f.write("two\n")
    assert path.read_text() == "one\ntwo\n"
    with open_to_write(path, "w") as f:
        f.write("new\n")
    assert path.read_text() == "new\n"


def test_open_to_write_never_waits_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "console.log"
    os.mkfifo(fifo)
    out: list[str] = []

    def write() -> None:
        try:
            open_to_write(fifo, "a")
        except FedbenchError as exc:
            out.append(str(exc))

    worker = threading.Thread(target=write, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "opening a FIFO blocked"
    assert out and out[0].startswith(f"{fifo} is not a regular file (a FIFO"), out


def test_write_file_replaces_the_name_and_refuses_a_link(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_file(path, "{}\n")
    write_file(path, b"[]\n", perms=0o600)
    assert path.read_text() == "[]\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left
    victim = _plant(tmp_path, "config.yaml", tmp_path)
    with pytest.raises(FedbenchError) as error:
        write_file(tmp_path / "config.yaml", "x")
    _refused(error, tmp_path / "config.yaml")
    assert victim.read_text() == KEEP


def test_a_folder_holding_a_link_anywhere_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "server.log").write_text("fine\n")
    check_no_links(run)
    _plant(run, "logs/processes.csv", tmp_path)
    with pytest.raises(FedbenchError) as error:
        check_no_links(run)
    _refused(error, run / "logs" / "processes.csv")
    os.symlink(run, tmp_path / "outputs")  # the run folder itself may be reached by a link
    (run / "logs" / "processes.csv").unlink()
    check_no_links(tmp_path / "outputs")


def test_a_linked_subfolder_is_not_made_or_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(elsewhere, run / "logs")
    with pytest.raises(FedbenchError) as error:
        make_folder(run / "logs")
    _refused(error, run / "logs")
    assert make_folder(run / "new" / "deeper").is_dir()


# --- every writer of a run folder --------------------------------------------------------------


def test_a_run_lock_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    from fedbench.report.lock import LOCK_FILE, RunLock

    victim = _plant(tmp_path / "run", LOCK_FILE, tmp_path)
    with pytest.raises(FedbenchError) as error:
        RunLock(tmp_path / "run").acquire()
    _refused(error, tmp_path / "run" / LOCK_FILE)
    assert victim.read_text() == KEEP


def test_a_console_log_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    from fedbench.report.progress import LOG_NAME, Console

    victim = _plant(tmp_path / "run", LOG_NAME, tmp_path)
    console = Console(stream=io.StringIO(), live=False)
    with pytest.raises(FedbenchError) as error:
        console.attach(tmp_path / "run")
    _refused(error, tmp_path / "run" / LOG_NAME)
    console.line("after the refusal")
    assert console.attached == [] and victim.read_text() == KEEP


@pytest.mark.parametrize("name", ["rounds.csv", "summary.json"])
def test_the_run_writer_never_writes_through_a_link(tmp_path: Path, name: str) -> None:
    from fedbench.report.writer import DayResult, RunWriter

    victim = _plant(tmp_path / "run", name, tmp_path)
    with pytest.raises(FedbenchError) as error:
        writer = RunWriter(tmp_path / "run", {"name": "t"})
        writer.day(DayResult(0, 0, 0.5, 1.0, 0.0, 0.0))
    _refused(error, tmp_path / "run" / name)
    assert victim.read_text() == KEEP


def test_the_run_writer_moves_interrupted_rows_aside_in_the_folder(tmp_path: Path) -> None:
    from fedbench.report.writer import RunWriter

    run = tmp_path / "run"
    writer = RunWriter(run, {"name": "t"})
    state = writer.state_dict()
    writer.finish("interrupted")
    with (run / "rounds.csv").open("a") as f:
        f.write("a row of a round that did not complete\n")
    # The next number: one more than the files already there (the link is one).
    victim = _plant(run, "rounds.interrupted-2.csv", tmp_path)
    again = RunWriter(run, {"name": "t"})
    with pytest.raises(FedbenchError) as error:
        again.load_state_dict(state)
    _refused(error, run / "rounds.interrupted-2.csv")
    assert victim.read_text() == KEEP


def test_server_rounds_never_writes_through_a_link(tmp_path: Path) -> None:
    from fedbench.report.server_rounds import SERVER_ROUNDS_CSV, ServerRoundsWriter

    victim = _plant(tmp_path, SERVER_ROUNDS_CSV, tmp_path)
    with pytest.raises(FedbenchError) as error:
        ServerRoundsWriter(tmp_path)
    _refused(error, tmp_path / SERVER_ROUNDS_CSV)
    assert victim.read_text() == KEEP


def test_flower_log_never_written_through_a_link(tmp_path: Path) -> None:
    from fedbench.runtime.logs import copy_flower_logs

    victim = _plant(tmp_path, "flower.log", tmp_path)
    with pytest.raises(FedbenchError) as error:
        copy_flower_logs(tmp_path)
    _refused(error, tmp_path / "flower.log")
    assert victim.read_text() == KEEP
    handler = copy_flower_logs(tmp_path / "fresh")  # a real file: logged as before
    try:
        handler.handle(logging.makeLogRecord({"msg": "hello", "levelno": logging.INFO}))
    finally:
        logging.getLogger("flwr").removeHandler(handler)
        handler.close()
    assert "hello" in (tmp_path / "fresh" / "flower.log").read_text()


def test_the_process_record_and_logs_never_written_through_a_link(tmp_path: Path) -> None:
    from fedbench.runtime.processes import ProcessSet

    victim = _plant(tmp_path / "logs", "processes.csv", tmp_path)
    with pytest.raises(FedbenchError) as error:
        ProcessSet(record=tmp_path / "logs" / "processes.csv", watchdog=False)
    _refused(error, tmp_path / "logs" / "processes.csv")
    assert victim.read_text() == KEEP
    procs = ProcessSet(watchdog=False, die_with_parent=False)
    log_victim = _plant(tmp_path / "logs", "superlink.log", tmp_path)
    with pytest.raises(FedbenchError) as error:
        procs.start("true", ["true"], {"PATH": "/usr/bin:/bin"}, tmp_path / "logs/superlink.log")
    _refused(error, tmp_path / "logs" / "superlink.log")
    assert log_victim.read_text() == KEEP and procs.started == []


# --- the two command lines of the finding ------------------------------------------------------


def test_resume_with_a_run_lock_link_and_a_run_into_a_console_log_link_are_one_line(
    tmp_path: Path,
) -> None:
    from fedbench.experiment.config_file import config_yaml
    from fedbench.report.lock import LOCK_FILE
    from fedbench.report.progress import LOG_NAME
    from tests.cli_runner import Command, run_commands
    from tests.test_compose import typed

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    experiment = typed(["experiment=smoke", f"+output_dir={resumed}"])
    (resumed / "config.yaml").write_text(config_yaml(experiment))  # killed before round 1
    lock_victim = _plant(resumed, LOCK_FILE, tmp_path)
    premade = tmp_path / "premade"
    premade.mkdir()
    log_victim = _plant(premade, LOG_NAME, tmp_path)
    commands = [
        Command("fedbench", (f"resume={resumed}",), str(tmp_path)),
        Command("fedbench", ("experiment=smoke", f"hydra.run.dir={premade}"), str(tmp_path)),
    ]
    results = run_commands(commands, timeout_s=90)
    places = ((resumed / LOCK_FILE, lock_victim), (premade / LOG_NAME, log_victim))
    for result, (path, victim) in zip(results, places, strict=True):
        assert victim.read_text() == KEEP
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.code == 2, result.stderr[-3000:]
        assert lines == [
            f"fedbench: error: {path} {LINK}; remove the link, or give another run folder"
        ], lines
        assert path.is_symlink()  # left as it was found
