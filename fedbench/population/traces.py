"""Measured traces in place of drawn values: availability and capacity files.

Two tables, CSV or Parquet (by the file's suffix; Parquet needs pandas with
pyarrow installed, CSV needs nothing), documented in docs/populations.md:

- availability: `device, start_s, end_s, state` - one row per interval the
  device is `available` (on battery) or `charging` (available, charging);
  `unavailable` rows may be given and are skipped. The pattern repeats with
  the period `period_s` (an optional column, one value per device), else
  the file's last `end_s`: FedScale replays its traces the same way.
- capacity: `device, speed, down_mbps, up_mbps` and optionally `rtt_ms`.

`device` is a device's index in the fleet (0, 1, ...) or its name
(`pixel2-003`). Devices a trace names take the trace's values; the others
keep their draws. `fedscale_to_tables` converts FedScale's published
layout (fedbench.population.fedscale).
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.population.windows import Windows
from fedbench.trust import bounded

if TYPE_CHECKING:
    from fedbench.experiment.population import TraceConfig


class Traced(Protocol):
    """What traces replace of a drawn population (fedbench.population.draw.Population)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def speed(self) -> np.ndarray: ...
    @property
    def down_mbps(self) -> np.ndarray: ...
    @property
    def up_mbps(self) -> np.ndarray: ...
    @property
    def rtt_ms(self) -> np.ndarray: ...
    @property
    def windows(self) -> Windows: ...


Population = TypeVar("Population", bound=Traced)

AVAILABILITY = ("device", "start_s", "end_s", "state")
CAPACITY = ("device", "speed", "down_mbps", "up_mbps")
STATES = ("available", "charging", "unavailable")
PARQUET = (".parquet", ".pq")


def read_table(path: str | Path, key: str, columns: Sequence[str]) -> dict[str, list[str]]:
    """A trace file as columns of text; a missing file or column is one clear error."""
    path = Path(path)
    check_regular(path, f"{key}={str(path)!r}")
    if path.suffix in PARQUET:
        table = {k: [str(v) for v in vs] for k, vs in _parquet(path, key).items()}
    else:
        table = _csv(path, key)
    missing = [c for c in columns if c not in table]
    if missing or not table.get(columns[0]):
        raise FedbenchError(
            f"{key}={str(path)!r}: expected columns {', '.join(columns)} and at least one row"
            + (f"; missing {', '.join(missing)}" if missing else "")
        )
    return table


# What a path that is not a regular file is, for the one line that refuses it.
_NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_GIVE = "give a CSV or Parquet file"


def check_regular(path: Path, where: str) -> None:
    """Refuse, without opening it, a trace path that is no regular file, saying what it is.

    Only its metadata is read: opening a FIFO blocks until a writer comes and
    /dev/zero never ends, so each is named from `stat` and refused.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise FedbenchError(
                f"{where}: a symbolic link to {os.readlink(path)!r}, which does not exist; {_GIVE}"
            ) from None
        raise FedbenchError(f"{where}: no such file (a CSV or Parquet trace)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FedbenchError(
                f"{where}: a loop of symbolic links that never reaches a file; {_GIVE}"
            ) from None
        raise FedbenchError(f"{where}: cannot read it ({exc.strerror or exc}); {_GIVE}") from None
    if stat.S_ISDIR(mode):
        raise FedbenchError(f"{where}: a folder, not a trace file; {_GIVE}")
    for test, kind in _NOT_REGULAR:
        if test(mode):
            raise FedbenchError(f"{where}: {kind}, not a regular file; {_GIVE}")


def _csv(path: Path, key: str) -> dict[str, list[str]]:
    """A CSV trace as columns; binary content and rows of the wrong length are refused."""
    where = f"{key}={str(path)!r}"
    try:  # the size before a byte is read, each line's length as it is read
        with bounded.capped_lines(path, where, bounded.TRACE_CSV) as lines:
            reader = csv.reader(lines)
            header = next(reader, [])
            rows = list(reader)
    except UnicodeDecodeError:
        raise FedbenchError(f"{where}: not a text CSV file (a CSV or Parquet trace)") from None
    except csv.Error as exc:
        raise FedbenchError(f"{where}: not a readable CSV ({exc})") from None
    except OSError as exc:  # a permission, or an I/O error of the file's disk
        raise FedbenchError(f"{where}: cannot read it ({exc.strerror or exc}); {_GIVE}") from None
    if "\0" in "".join(header):
        raise FedbenchError(f"{where}: not a text CSV file (a CSV or Parquet trace)")
    for line, row in enumerate(rows, 2):
        if row and len(row) != len(header):
            raise FedbenchError(
                f"{where}: line {line} has {len(row)} value(s), the header {len(header)} "
                f"({', '.join(header)})"
            )
    rows = [r for r in rows if r]
    return {name: [r[i] for r in rows] for i, name in enumerate(header)}


def write_table(path: str | Path, columns: Mapping[str, Sequence[object]]) -> Path:
    """Write a trace table: Parquet for a .parquet path (pandas + pyarrow), else CSV."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in PARQUET:
        pandas = _pandas(f"writing {path}")
        pandas.DataFrame({k: list(v) for k, v in columns.items()}).to_parquet(path, index=False)
        return path
    names = list(columns)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(names)
        out.writerows(zip(*(columns[k] for k in names), strict=True))
    return path


def _pandas(why: str):  # type: ignore[no-untyped-def]
    try:
        import pandas
    except ImportError:
        raise FedbenchError(
            f"{why}: Parquet needs pandas and pyarrow (pip install pandas pyarrow); "
            "or give a .csv file"
        ) from None
    return pandas


def _parquet(path: Path, key: str) -> dict[str, list[object]]:
    bounded.check_size(path, f"{key}={str(path)!r}", bounded.TRACE_PARQUET)
    frame = _pandas(f"{key}={str(path)!r}").read_parquet(path)
    return {str(c): frame[c].tolist() for c in frame.columns}


def _numbers(table: dict[str, list[str]], column: str, key: str) -> np.ndarray:
    try:
        values = np.array([float(v) for v in table[column]])
    except ValueError as exc:
        raise FedbenchError(f"{key}: column {column}: {exc}") from None
    if not np.all(np.isfinite(values)):
        raise FedbenchError(f"{key}: column {column} has a value that is not a finite number")
    return values


def _indices(ids: list[str], names: Sequence[str], key: str) -> np.ndarray:
    """Device ids (indices or names) -> indices into the fleet."""
    index_of = {name: i for i, name in enumerate(names)}
    out = np.empty(len(ids), dtype=np.int64)
    for k, raw in enumerate(ids):
        text = raw.strip()
        i = int(text) if text.isdigit() else index_of.get(text, -1)
        if not 0 <= i < len(names):
            raise FedbenchError(
                f"{key}: device {raw!r} is not in the fleet ({len(names)} devices: "
                f"an index 0..{len(names) - 1} or a name such as {names[0]!r})"
            )
        out[k] = i
    return out


def apply_traces(pop: Population, trace: TraceConfig, names: Sequence[str]) -> Population:
    """The population with the traced devices' values replaced by the traces'."""
    if trace.capacity:
        pop = _capacity(pop, trace.capacity, names)
    if trace.availability:
        pop = dataclasses.replace(pop, windows=_availability(pop, trace.availability, names))
    return pop


def _capacity(pop: Population, path: str, names: Sequence[str]) -> Population:
    key = "fleet.population.trace.capacity"
    table = read_table(path, key, CAPACITY)
    idx = _indices(table["device"], names, key)
    changed: dict[str, np.ndarray] = {}
    for column in ("speed", "down_mbps", "up_mbps", "rtt_ms"):
        if column not in table:
            continue
        values = _numbers(table, column, key)
        if column == "rtt_ms" and np.any(values < 0) or column != "rtt_ms" and np.any(values <= 0):
            raise FedbenchError(f"{key}: column {column} must be > 0 (rtt_ms >= 0)")
        out = getattr(pop, column).copy()
        out[idx] = values
        changed[column] = out
    return dataclasses.replace(pop, **changed)  # type: ignore[arg-type]


def _availability(pop: Traced, path: str, names: Sequence[str]) -> Windows:
    key = "fleet.population.trace.availability"
    table = read_table(path, key, AVAILABILITY)
    idx = _indices(table["device"], names, key)
    start, end = _numbers(table, "start_s", key), _numbers(table, "end_s", key)
    states = [s.strip() for s in table["state"]]
    bad = sorted({s for s in states if s not in STATES})
    if bad:
        raise FedbenchError(f"{key}: state {bad[0]!r}; valid: {', '.join(STATES)}")
    if np.any(start < 0) or np.any(end <= start):
        row = int(np.flatnonzero((start < 0) | (end <= start))[0])
        raise FedbenchError(f"{key}: row {row + 1}: expected 0 <= start_s < end_s")
    traced = np.unique(idx)
    period = pop.windows.period_s.copy()
    if "period_s" in table:
        period[idx] = _numbers(table, "period_s", key)
    else:
        period[traced] = float(end.max())
    if np.any(end > period[idx]):
        raise FedbenchError(f"{key}: an interval ends after its device's period_s")
    w = pop.windows
    keep = ~np.isin(w.device, traced)  # untraced devices keep their drawn windows
    on = np.array([s != "unavailable" for s in states])
    described = w.described.copy()
    described[traced] = True
    return Windows.build(
        w.n,
        np.concatenate([w.device[keep], idx[on]]),
        np.concatenate([w.start_s[keep], start[on]]),
        np.concatenate([w.end_s[keep] - w.start_s[keep], (end - start)[on]]),
        np.concatenate([w.charging[keep], np.array([s == "charging" for s in states])[on]]),
        period,
        described,
    )
