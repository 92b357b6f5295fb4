"""Caps on a file fedbench reads from outside, checked before it is parsed.

A shared run folder, a trace or a profile is someone else's file, and a
parser handed one whole trusts its size and shape: a 1 KB config.yaml of
nested YAML aliases (`&a [x, x]`, `&b [*a, *a]`, ...) stands for 10^9 values
and hung `resume=`; a 2 GB sparse trace, one line of NUL bytes, was read into
memory before any check. So every reader goes through this module first:

- the size, from `fstat` of the opened file, against its kind's cap (`Cap`),
  before a byte is read; a FIFO or device is refused, never waited on;
- line-based files (YAML, CSV) have a longest line, checked as they are read;
- YAML is walked as parser events before anything is composed: nesting
  depth, aliases, and the values the aliases add when expanded, so a bomb is
  refused in the time it takes to scan its own few bytes.

Each refusal is one line naming the file, the cap and what would pass.
The caps are far above what fedbench writes (a config.yaml is a few KB, a
million-device trace about 200 MB) and below what hurts a host.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from fedbench.errors import FedbenchError

KIB, MIB, GIB = 1024, 1024**2, 1024**3


@dataclass(frozen=True)
class Cap:
    """How large one kind of file may be, and its longest line (None: not line-based)."""

    kind: str  # what the file is, as its refusal names it
    max_bytes: int
    max_line: int | None = None


CONFIG_YAML = Cap("a run's config.yaml", 16 * MIB, 64 * KIB)
PROFILE_YAML = Cap("a device profile", 1 * MIB, 64 * KIB)
# A row is four or five numbers (~32 bytes): a million devices with six intervals each
# is ~200 MB, and held as Python strings about ten times that.
TRACE_CSV = Cap("a trace CSV", 256 * MIB, 4 * KIB)
TRACE_PARQUET = Cap("a Parquet trace", 64 * MIB)  # compressed: it unpacks to several times that
FEDSCALE_PICKLE = Cap("a FedScale trace pickle", 1 * GIB)
RUN_CSV = Cap("a run's CSV", 1 * GIB, 64 * KIB)  # rounds.csv, server_rounds.csv
SUMMARY_JSON = Cap("a summary.json", 64 * MIB)
# VGG-16 with FedAdam's two moments is 1.7 GB; no model fedbench builds comes near.
CHECKPOINT = Cap("a checkpoint", 4 * GIB)

# fedbench's own YAML nests about six levels and uses no alias; a profile a few.
MAX_YAML_DEPTH = 64
MAX_YAML_ALIASES = 1_000
MAX_ALIAS_VALUES = 100_000  # values the aliases add, expanded (an alias bomb: 10^9)


def size_text(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def check_size(path: Path, where: str, cap: Cap) -> int:
    """The size of the regular file `path`, if it is within `cap` (metadata only)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise FedbenchError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    return _within(info, where, cap)


def _within(info: os.stat_result, where: str, cap: Cap) -> int:
    if not stat.S_ISREG(info.st_mode):
        raise FedbenchError(f"{where}: not a regular file ({cap.kind} is one); refused unread")
    if info.st_size > cap.max_bytes:
        raise FedbenchError(
            f"{where}: {size_text(info.st_size)}, more than the {size_text(cap.max_bytes)} "
            f"{cap.kind} may be; refused before reading it (give a file under "
            f"{size_text(cap.max_bytes)})"
        )
    return info.st_size


def open_capped(path: Path, where: str, cap: Cap) -> IO[bytes]:
    """`path` opened for reading once `fstat` says it is a regular file within `cap`.

    O_NONBLOCK: a FIFO put where a file should be is refused, never waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FedbenchError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    try:
        _within(os.fstat(fd), where, cap)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_capped(path: Path, where: str, cap: Cap) -> bytes:
    """The bytes of `path`, refused unread above `cap` (and with a line longer than its own)."""
    with open_capped(path, where, cap) as f:
        # The size fstat gave, plus one byte to see growth: a read of the cap itself would
        # allocate the whole cap up front (64 MiB for a summary.json of a few kB).
        size = os.fstat(f.fileno()).st_size
        data = f.read(min(size, cap.max_bytes) + 1)  # a file that grew stops at its cap
        if len(data) > size:  # it grew after fstat: read on, up to the cap
            data += f.read(cap.max_bytes + 1 - len(data))
    if len(data) > cap.max_bytes:
        raise FedbenchError(f"{where}: grew past {size_text(cap.max_bytes)} while read; refused")
    if cap.max_line is not None:
        check_lines(data, where, cap.max_line)
    return data


def check_lines(data: bytes, where: str, max_line: int) -> None:
    """Refuse `data` if a line is longer than `max_line` bytes, naming the line."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start, start + max_line + 1)
        if end < 0:
            if len(data) - start > max_line:
                _long_line(where, data.count(b"\n", 0, start) + 1, max_line)
            return
        start = end + 1


def bounded_lines(f: IO[str], where: str, max_line: int) -> Iterator[str]:
    """The lines of a text file, each read with a bound: a line without end is never held."""
    number = 0
    while True:
        line = f.readline(max_line + 2)  # + the newline (and a \r before it)
        if not line:
            return
        number += 1
        if len(line.rstrip("\r\n")) > max_line:
            _long_line(where, number, max_line)
        yield line


@contextlib.contextmanager
def capped_lines(path: Path, where: str, cap: Cap) -> Iterator[Iterator[str]]:
    """The lines of a UTF-8 text file within `cap`, each checked against its longest line.

    Lines keep their ends (newline=""), as csv.reader wants them.
    """
    with (
        open_capped(path, where, cap) as raw,
        io.TextIOWrapper(raw, encoding="utf-8", newline="") as text,
    ):
        yield bounded_lines(text, where, cap.max_line or cap.max_bytes)


def _long_line(where: str, number: int, max_line: int) -> None:
    raise FedbenchError(
        f"{where}: line {number} is longer than {max_line:,} bytes, which no such file "
        "fedbench reads has; refused before parsing it"
    )


def load_yaml(path: Path, where: str, cap: Cap, loader: Any = yaml.SafeLoader) -> Any:
    """YAML from `path` once its size, lines and structure pass (`check_yaml`).

    A file that is not UTF-8 raises UnicodeDecodeError and bad YAML yaml.YAMLError,
    for the caller to word as it words them today.
    """
    text = read_capped(path, where, cap).decode("utf-8")
    check_yaml(text, where)
    return yaml.load(text, Loader=loader)  # noqa: S506 - callers pass SafeLoader subclasses


def load_json(path: Path, where: str, cap: Cap) -> Any:
    """JSON from `path` within `cap`; ValueError (JSONDecodeError, UnicodeDecodeError) if bad.

    Python's decoder recurses once per level: 100,000 `[` (200 KB) is a RecursionError.
    """
    data = read_capped(path, where, cap)
    try:
        return json.loads(data)
    except RecursionError:
        raise FedbenchError(
            f"{where}: nested deeper than Python's JSON reader can follow; not a file "
            "fedbench wrote, refused"
        ) from None


def check_yaml(text: str, where: str) -> None:
    """Refuse YAML nested deeper than MAX_YAML_DEPTH or whose aliases expand too far.

    Parser events only: nothing is composed, so an alias costs what its `*name`
    costs to scan, and the expanded size of each anchor is summed as it closes.
    """
    parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # events only: libyaml's are fast
    expanded: dict[str, int] = {}  # anchor -> values it stands for
    stack: list[list[Any]] = []  # open collections: [anchor, values so far]
    aliases = added = 0
    for event in yaml.parse(text, Loader=parser):
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 1])
            if len(stack) > MAX_YAML_DEPTH:
                _refuse_yaml(where, line, f"nested more than {MAX_YAML_DEPTH} levels deep")
            continue
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            size = expanded.get(str(event.anchor), 1)
            added += size
            if aliases > MAX_YAML_ALIASES:
                _refuse_yaml(where, line, f"more than {MAX_YAML_ALIASES:,} aliases (*name)")
            if added > MAX_ALIAS_VALUES:
                why = f"its aliases expand to more than {MAX_ALIAS_VALUES:,} values (an alias bomb)"
                _refuse_yaml(where, line, why)
            anchor = None
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
        else:  # stream and document events
            continue
        if anchor:
            expanded[str(anchor)] = size
        if stack:
            stack[-1][1] += size


def _refuse_yaml(where: str, line: int, why: str) -> None:
    raise FedbenchError(
        f"{where}: line {line}: {why}; fedbench reads YAML up to {MAX_YAML_DEPTH} levels and "
        f"{MAX_ALIAS_VALUES:,} values of aliases; refused before building anything"
    )
