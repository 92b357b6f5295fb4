"""Secrets never reach a results file: flwr run's `--token`, secret-named keys and variables."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from fedbench.core import redact
from fedbench.report.progress import Console
from fedbench.report.provenance import COMMAND_ENV, command_line, provenance
from fedbench.runtime.logs import RedactingFormatter

SECRET = "abc123tok"
FLWR_ARGV = [
    "/venv/bin/flwr-serverapp",
    "--serverappio-api-address",
    "127.0.0.1:9091",
    "--token",
    SECRET,
    "--parent-pid",
    "77",
]


@pytest.fixture(autouse=True)
def _forget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_known", set())
    monkeypatch.delenv(COMMAND_ENV, raising=False)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (FLWR_ARGV, "--token REDACTED"),
        (["flwr", "run", f"--token={SECRET}"], "--token=REDACTED"),
        (["fedbench", f"+app_run_config.api_key={SECRET}"], "+app_run_config.api_key=REDACTED"),
        (["x", "--db-password", SECRET], "--db-password REDACTED"),
    ],
)
def test_command_line_masks_secret_flags_and_keys(argv: list[str], shown: str) -> None:
    line = command_line(argv)
    assert SECRET not in line and shown in line


def test_where_a_secret_lives_is_not_masked() -> None:
    line = command_line(["flower-superlink", "--superexec-auth-secret-file", "/run/s.secret"])
    assert "/run/s.secret" in line


def test_provenance_of_flwr_serverapp_has_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.orig_argv", FLWR_ARGV)
    assert SECRET not in json.dumps(provenance(), default=str)
    monkeypatch.setenv(COMMAND_ENV, "flwr run . --token " + SECRET)
    assert SECRET not in command_line()


def test_a_secret_once_seen_is_masked_in_any_text_and_log(tmp_path: Path) -> None:
    command_line(FLWR_ARGV)  # the value is remembered
    console = Console()
    console.attach(tmp_path)
    console.line(f"connecting with {SECRET} (token={SECRET})")
    console.detach(tmp_path)
    log = (tmp_path / "console.log").read_text()
    assert SECRET not in log and "REDACTED" in log
    record = logging.LogRecord("flwr", logging.INFO, "", 0, f"run {SECRET}", None, None)
    assert SECRET not in RedactingFormatter("%(message)s").format(record)


def test_environment_secrets_are_remembered() -> None:
    redact.remember_environment({"FLWR_TOKEN": "envsecret9", "HOME": "/home/me"})
    assert redact.redact_text("x envsecret9 /home/me") == "x REDACTED /home/me"


def test_ordinary_text_is_untouched() -> None:
    text = "strategy=oort round_close=first_k k: 3 --seed 1 per-task token used"
    assert redact.redact_text(text) == text
