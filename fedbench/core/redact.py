"""Secrets never reach a results file: command lines and text, redacted.

A run folder gets shared (a paper's artefact, a bug report), and it records
the command that made it (summary.json's provenance), what the console said
(console.log) and the config (config.yaml, the loggers'). `flwr run .`
starts the ServerApp as `flwr-serverapp ... --token <secret>`, and a user
may pass `+wandb.api_key=...`, so every one of those passes through here.

Two nets, because a secret can arrive as a flag or inside free text:
- a flag or key=value whose name says secret (token, secret, password,
  passwd, api key, access key, private key, credential), its value replaced by
  `REDACTED` (a name ending in file/path/dir names where the secret lives, and is kept);
- every value seen so (`redact_argv`, `remember_environment`) is remembered
  for the process, and `redact_text` masks it wherever it appears later.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Mapping, Sequence

MASK = "REDACTED"  # shell-safe: shlex.join leaves it unquoted
_SECRET_NAME = re.compile(
    r"(token|secret|password|passwd|api[-_]?key|access[-_]?key|private[-_]?key|credential)",
    re.IGNORECASE,
)
_WHERE_IT_LIVES = re.compile(r"[-_.](file|path|dir)$", re.IGNORECASE)
_MIN_REMEMBERED = 4  # shorter values would mask ordinary words
_known: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """Does a flag, key or variable name say its value is a secret?"""
    name = name.lstrip("-+~")
    return bool(_SECRET_NAME.search(name)) and not _WHERE_IT_LIVES.search(name)


def remember(value: str) -> None:
    """Mask `value` in every later `redact_text` of this process."""
    if len(value) >= _MIN_REMEMBERED and value != MASK:
        with _lock:
            _known.add(value)


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """Remember the values of the environment's secret-named variables (FLWR_TOKEN, ...)."""
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_name(name):
            remember(value)


def remember_process() -> None:
    """Remember the secrets of this process's command line and environment."""
    redact_argv(getattr(sys, "orig_argv", sys.argv))
    remember_environment()


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with the value of every secret-named flag or key=value replaced by REDACTED."""
    out: list[str] = []
    masking_next = False
    for arg in argv:
        if masking_next:
            remember(arg)
            out.append(MASK)
            masking_next = False
            continue
        name, eq, value = arg.partition("=")
        if eq and is_secret_name(name):
            remember(value)
            out.append(f"{name}={MASK}")
        elif arg.startswith("-") and not eq and is_secret_name(arg):
            out.append(arg)
            masking_next = True
        else:
            out.append(arg)
    return [redact_text(a) for a in out]


_FLAG_VALUE = re.compile(r"(?<![\w-])(?P<name>--?[\w.-]+)(?P<sep>=|[ \t]+)(?P<value>[^\s'\"]+)")
# Separators stay on one line: `run_config:\n  api-key: x` is two keys, not one.
_KEY_VALUE = re.compile(
    r"(?<![\w.-])(?P<name>[+~]?[\w.-]+)(?P<sep>=|:[ \t]*)(?P<value>[^\s'\",}]+)"
)


def redact_text(text: str) -> str:
    """`text` with remembered secrets and secret-named flags' or keys' values masked."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)

    def mask(match: re.Match[str]) -> str:
        if not is_secret_name(match["name"]) or match["value"].startswith("-"):
            return match[0]
        return f"{match['name']}{match['sep']}{MASK}"

    return _KEY_VALUE.sub(mask, _FLAG_VALUE.sub(mask, text))
