"""Folders and files a command will write: checked before it starts, and written safely.

A run that only finds out at its end that its figure cannot be written, or
Ray finding its session folder is a file, is a traceback after minutes. These
checks try the write itself - permission bits do not tell (root passes every
access() test, /proc refuses everything) - and undo it, so a refused command
leaves nothing behind.

The second half writes in a run folder, which may come from someone else
(docs/security.md): `open_to_write` and `write_file` open what fedbench
writes there without following a symbolic link, and `check_no_links` refuses
a folder that holds one, so a planted `run.lock -> ~/.bashrc` is one line
of refusal, never a write to the link's target.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any

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


# --- writing in a run folder: into it, never through a link in it ----------------------------
#
# A run folder may come from someone else (docs/security.md): a `run.lock` or
# `console.log` planted there as a symbolic link would make fedbench write
# wherever the link points. So every file fedbench writes in a run folder is
# opened here: without following a link (O_NOFOLLOW), never blocking on a FIFO,
# and only if what it opened is a regular file; a file replaced as a whole is
# written to a fresh temporary file beside it and renamed over the name.


def link_refusal(path: Path) -> FedbenchError:
    """The one line for a symbolic link where fedbench would write."""
    return FedbenchError(
        f"{path} is a symbolic link: fedbench writes into a run folder, never through a "
        "link in it; remove the link, or give another run folder"
    )


def _not_regular(path: Path) -> FedbenchError:
    return FedbenchError(
        f"{path} is not a regular file (a FIFO, a device or a socket): fedbench writes only "
        "regular files in a run folder; remove it, or give another run folder"
    )


def check_no_links(folder: Path) -> None:
    """Refuse a run folder that holds a symbolic link anywhere inside it (fedbench makes none).

    The folder itself may be a link (a user's outputs/ on another disk): what
    it holds may not.
    """
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue  # unreadable or gone: the writes themselves refuse what they must
        for entry in entries:
            if entry.is_symlink():
                raise link_refusal(Path(entry.path))
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))


def make_folder(path: Path) -> Path:
    """`path` as a folder (made if missing), refused if it is a symbolic link."""
    if path.is_symlink():
        raise link_refusal(path)
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():  # made a link in between: still not written through
        raise link_refusal(path)
    return path


_MODES = {  # open()'s mode (text or binary) -> the flags it stands for, without following
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "r+": os.O_RDWR,
}


def open_fd(path: Path, flags: int, perms: int = 0o644) -> int:
    """`os.open(path, flags, perms)` for a file in a run folder: never through a link, never a
    FIFO or a device; the descriptor (blocking, close-on-exec).

    A symbolic link at `path` is refused (`link_refusal`), and so is anything
    but a regular file - a FIFO is never waited on.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, perms)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_refusal(path) from None
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise _not_regular(path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _not_regular(path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_to_write(path: Path, mode: str = "a", perms: int = 0o644, **kwargs: Any) -> IO[Any]:
    """`open(path, mode, **kwargs)` for a file in a run folder, never through a link (`open_fd`).

    `mode`: a, w or r+, with b for bytes. `perms`: a new file's mode (less the umask).
    """
    fd = open_fd(path, _MODES[mode.replace("b", "")], perms)
    try:
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def write_file(path: Path, data: str | bytes, perms: int | None = None) -> None:
    """Replace `path` with `data` as a whole: a fresh file beside it, renamed over the name.

    A symbolic link at `path` is refused (a rename would replace the link, not
    write through it, but a folder holding one is not fedbench's to write).
    `perms`: the file's mode; default 0666 less the umask, as open() makes it.
    """
    if path.is_symlink():
        raise link_refusal(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            os.fchmod(f.fileno(), 0o666 & ~_umask() if perms is None else perms)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
