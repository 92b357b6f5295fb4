"""Folders and files a command will write, checked before it starts (and left as they were).

A run that only finds out at its end that its figure cannot be written, or
Ray finding its session folder is a file, is a traceback after minutes. These
checks try the write itself - permission bits do not tell (root passes every
access() test, /proc refuses everything) - and undo it, so a refused command
leaves nothing behind.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from fedbench.errors import FedbenchError


def check_folder(key: str, value: str | Path, shown: str | Path | None = None) -> Path:
    """`key=value` is, or can become, a folder this user can write; the path, expanded.

    `shown`: the value the user gave, when `value` is derived from it (a file's folder).
    """
    given = value if shown is None else shown
    named = "" if shown is None else f" {Path(value).expanduser()}"  # when it is not the value
    if not str(value).strip():
        raise FedbenchError(f"{key}= is empty: give a folder")
    path = Path(value).expanduser()
    made: list[Path] = []
    try:
        for folder in reversed([path, *path.parents]):
            if not folder.exists():
                folder.mkdir()
                made.append(folder)
        if not path.is_dir():
            raise FedbenchError(f"{key}={given}:{named} a file, not a folder; give a folder")
        probe = path / ".fedbench-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise FedbenchError(
            f"{key}={given}: cannot create or write the folder{named} ({exc.strerror or exc}); "
            "give a folder this user can write"
        ) from None
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
    return path


def check_file(key: str, value: str | Path) -> Path:
    """`key=value` names a file this user can write (made and removed again if it was new)."""
    path = Path(value).expanduser()
    if path.is_dir():
        raise FedbenchError(f"{key}={value}: a folder, not a file; give a file name")
    check_folder(key, path.parent, shown=value)
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        raise FedbenchError(
            f"{key}={value}: cannot write the file ({exc.strerror or exc}); give a path this "
            "user can write"
        ) from None
    if not existed:
        path.unlink()
    return path
