"""User-facing errors.

A `FedbenchError` is a mistake the user can fix (a bad value, a missing file).
The entry points print its message as one line and exit non-zero, without a
traceback. Anything else is a bug in fedbench and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class FedbenchError(Exception):
    """A user mistake: the message names the file, key or value and what is valid."""


def choices(valid: Iterable[object]) -> str:
    """Format valid choices for an error message, sorted and comma separated."""
    return ", ".join(sorted(str(v) for v in valid))


def closest(key: str, valid: Iterable[str]) -> str:
    """' (did you mean X?)' for the closest valid key, or ''."""
    match = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""
