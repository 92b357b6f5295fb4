"""Environment variables set for one block only, then put back as they were.

A simulation runs in fedbench's own process, and Ray's processes inherit that
process's environment: what a session needs there (Ray's settings, the
workers' accelerator, the leftovers token, the auth token's path) is set
around the session and no longer. The next run in the same process - a
sweep, a test - then starts from the environment the caller had, not from
the last session's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping


@contextlib.contextmanager
def scoped_environ(values: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[None]:
    """Within it, `values` are set and `unset` absent; after it, each name as it was.

    Every name it touches gets back its earlier value, or its absence, however
    the block ends.
    """
    gone = [name for name in unset if name not in values]
    before = {name: os.environ.get(name) for name in [*values, *gone]}
    for name in gone:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
