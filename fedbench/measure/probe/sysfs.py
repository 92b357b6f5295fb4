"""Reading small kernel files (sysfs, procfs) under a configurable root.

Every probe source reads through these helpers with paths relative to a
root directory: "/" on a device, a recorded fixture tree in tests. A file
that is missing, unreadable (RAPL counters are root-only on recent kernels)
or returns an I/O error (some thermal zones do when their sensor is off)
reads as None, so a source can report itself absent instead of failing.
"""

from __future__ import annotations

import re
from pathlib import Path

_DIGITS = re.compile(r"(\d+)")


def read_text(path: Path) -> str | None:
    """The stripped content of `path`, or None if it cannot be read."""
    try:
        # Unbuffered: sysfs attributes are regenerated on every read and a
        # single read() is what the kernel expects.
        with open(path, "rb", buffering=0) as f:
            return f.read().decode(errors="replace").strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def natural_key(path: Path) -> tuple[object, ...]:
    """Sort key putting cpu2 before cpu10 and thermal_zone9 before thermal_zone10."""
    parts = _DIGITS.split(path.name)
    return tuple(int(p) if p.isdigit() else p for p in parts)


def glob_sorted(root: Path, pattern: str) -> list[Path]:
    """Paths matching `pattern` (relative to `root`), in natural order."""
    return sorted(root.glob(pattern), key=lambda p: (natural_key(p.parent), natural_key(p)))


def is_real_root(root: Path) -> bool:
    """True when `root` is this machine's "/" (not a fixture tree).

    Sources that cannot be redirected to a tree (psutil, NVML) only run then.
    """
    return root.resolve() == Path("/")
