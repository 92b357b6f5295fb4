"""What an allowlisted class may be given from a config on disk: no URL, no path outside its folder.

The allowlist (fedbench.trust.targets) decides which classes a config from
disk may name, but their arguments come from the same file: a shared folder's
`report.loggers: [{_target_: fedbench.report.loggers.MlflowLogger, tracking_uri:
http://host}]` sent every config value, the folder's path and each round's
metrics to that host, and `TensorBoardLogger(log_dir=...)` wrote anywhere.
So every argument under a `_target_`, wherever it is nested, is checked too,
before anything is called:

- a URL (`scheme://...`), or any value of an argument named `*uri` or `*url`,
  is refused: the run would send something to whoever it names;
- an argument named as a place (`dir`, `path`, `file`, `folder`, or ending in
  `_dir`, `_path`, `_file`, `_folder`) must resolve inside the run folder, the
  way the class resolves it (`~` expanded, relative to the working folder);
- an argument named `*address` may name only this host (127.0.0.1, ::1,
  localhost): `ray_address` would hand the run to another machine's cluster.

A value the operator gives too, on the command line next to `resume=` (the
composition must then equal the folder's), is the operator's own and passes.
What this leaves alone: data roots (`data.source.root`) and the key and
certificate files a deployment reads are read where the config says.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError
from fedbench.trust.targets import TARGET_KEY

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_URL_NAME = re.compile(r"(uri|url)s?$", re.IGNORECASE)
_PLACE_NAME = re.compile(r"(^|_)(dir|path|file|folder)s?$", re.IGNORECASE)
_ADDRESS_NAME = re.compile(r"address(es)?$", re.IGNORECASE)
_THIS_HOST = ("localhost",)
# The way out, for a value that is the operator's own: the composition next to resume=
# must then equal the folder's, so the run's own overrides are given again with it.
_YOURS = (
    "set it to null in config.yaml, or, if it is yours, give the run's overrides again "
    "with it next to resume="
)


def check_arguments(
    values: Mapping[str, Any], folder: Path, source: str, operator: Mapping[str, Any] | None
) -> None:
    """Refuse, naming the key, the first argument of a `_target_` that leaves `folder`."""
    given = {w: v for w, _, v in _named_strings(operator or {}, "", "", False)}
    for where, name, value in _named_strings(values, "", "", False):
        if not value or given.get(where) == value:
            continue  # empty: the class's default; or the operator's own command line says so
        if _URL.match(value) or _URL_NAME.search(name):
            raise FedbenchError(
                f"{source}: {where}={value!r} is a URL, and a config on disk may not send the "
                f"run anywhere; nothing was called ({_YOURS})"
            )
        if _PLACE_NAME.search(name):
            _check_inside(value, where, folder, source)
        if _ADDRESS_NAME.search(name) and not _this_host(value):
            raise FedbenchError(
                f"{source}: {where}={value!r} is not this host, and a config on disk may name "
                f"only this one (127.0.0.1, ::1, localhost); nothing was called ({_YOURS})"
            )


def _named_strings(
    value: object, where: str, name: str, inside: bool
) -> Iterator[tuple[str, str, str]]:
    """(key, argument name, text) of every string argument under a `_target_` mapping."""
    if isinstance(value, Mapping):
        inside = inside or TARGET_KEY in value
        for key, sub in value.items():
            if key != TARGET_KEY:
                yield from _named_strings(
                    sub, f"{where}.{key}" if where else str(key), str(key), inside
                )
    elif isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            yield from _named_strings(sub, f"{where}[{i}]", name, inside)
    elif inside and isinstance(value, str):
        yield where, name, value


def _check_inside(value: str, where: str, folder: Path, source: str) -> None:
    home = folder.resolve()
    # As the class will resolve it: relative paths are the working folder's, not the run's.
    resolved = (Path.cwd() / Path(value).expanduser()).resolve()
    if resolved == home or home in resolved.parents:
        return
    raise FedbenchError(
        f"{source}: {where}={value!r} is {resolved}, outside the run folder {home}, and a "
        f"config on disk may only write inside its folder; nothing was called ({_YOURS})"
    )


def _this_host(value: str) -> bool:
    host = value.rsplit("@", 1)[-1]
    if host.startswith("["):  # [::1]:port
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:  # host:port
        host = host.partition(":")[0]
    if host.lower() in _THIS_HOST:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
