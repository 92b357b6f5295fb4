"""`python -m fedbench.runtime.flwr_cli ARGS`: Flower's `flwr` CLI, sending the run's control key.

A deployment's SuperLink answers its Control API only to calls that carry
the run's control key (fedbench.runtime.superlink). Flower's CLI has no
option for a header, so fedbench runs it in-process with one interceptor
added to every protobuf-over-HTTP client it makes (the seam Flower's own
version and account-auth headers use): `x-fedbench-control-key`, read from
the file `FEDBENCH_CONTROL_KEY_FILE` names (0600, in the run's credentials).
Without that variable the CLI runs unchanged. fedbench.runtime.flwr_batch
uses the same hook for its batched `--format json` calls.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from fedbench.runtime.superlink import KEY_HEADER, read_key

KEY_ENV = "FEDBENCH_CONTROL_KEY_FILE"


class ControlKey:
    """A ProtobufClientInterceptor that puts the control key on every request."""

    def __init__(self, key: bytes) -> None:
        self.value = key.decode("ascii")

    def intercept(self, context: Any, call_next: Any) -> Any:
        context.request.headers[KEY_HEADER] = self.value
        return call_next(context)


def send_control_key() -> None:
    """Give every Flower HTTP client made from now on the key `FEDBENCH_CONTROL_KEY_FILE` holds."""
    path = os.environ.get(KEY_ENV)
    if not path:
        return
    interceptor = ControlKey(read_key(Path(path)))
    from flwr.supercore.protobuf.client import ProtobufClient

    original = ProtobufClient.__init__

    def init(self: ProtobufClient, base_url: str, *, interceptors: Any = (), **kw: Any) -> None:
        original(self, base_url, interceptors=(*interceptors, interceptor), **kw)

    ProtobufClient.__init__ = init  # type: ignore[method-assign]


def main() -> None:
    send_control_key()
    from flwr.cli.app import app

    sys.argv[0] = "flwr"
    app()


if __name__ == "__main__":
    main()
