"""`python -m fedbench.runtime.flwr_batch '[["supernode", "register", ...], ...]'`.

Runs several `flwr` CLI commands in one interpreter: the CLI's start-up
(seconds on a small device) is paid once, not once per node key. Each
command must ask for `--format json`; its JSON document (the result, or
Flower's `{"success": false, "error-message": ...}`) is printed in order,
so the caller reads one document per command. The calls carry the run's
control key (fedbench.runtime.flwr_cli).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    import click
    from flwr.cli.app import app

    from fedbench.runtime.flwr_cli import send_control_key

    send_control_key()
    args = list(sys.argv[1:] if argv is None else argv)
    commands = json.loads(args[0])
    for command in commands:
        # On failure flwr has printed the command's JSON error document already.
        with contextlib.suppress(SystemExit, click.exceptions.Exit, click.ClickException):
            app(args=[str(a) for a in command], standalone_mode=False)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
