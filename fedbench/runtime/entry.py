"""Run one of Flower's console scripts with this interpreter.

    python -m fedbench.runtime.entry flwr-serverapp --serverappio-api-address ...

fedbench starts Flower's processes (`flower-supernode`, `flwr-serverapp`,
`flwr-clientapp`) as `[sys.executable, "-m", "fedbench.runtime.entry", NAME, ...]`
rather than as NAME found on PATH. PATH can name another interpreter's script: in a
virtual environment made with `--system-site-packages`, Flower's scripts are the
system's, so the started process imported the system's fedbench (another checkout,
another commit) and a resume was refused for a commit mismatch. The entry point is
read from the installed metadata, so what runs is exactly what `NAME` would run in
this environment. The name stays on the command line (a process's role is read from
it: fedbench.runtime.processes).
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

MODULE = "fedbench.runtime.entry"


class NoSuchScript(LookupError):
    """No console script of that name is installed in this environment."""


def argv(name: str) -> list[str]:
    """The command line that runs console script `name` with this interpreter.

    Raises NoSuchScript when this environment has no such script.
    """
    if not entry_points(group="console_scripts", name=name):
        raise NoSuchScript(name)
    return [sys.executable, "-m", MODULE, name]


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(f"usage: python -m {MODULE} SCRIPT [ARG ...]")
    name = sys.argv[1]
    found = entry_points(group="console_scripts", name=name)
    if not found:
        sys.exit(f"{MODULE}: no console script {name!r} is installed in this environment")
    sys.argv = [name, *sys.argv[2:]]  # what the script itself would see
    sys.exit(next(iter(found)).load()())


if __name__ == "__main__":
    main()
