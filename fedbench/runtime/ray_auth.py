"""Ray's token authentication for the private simulation node (docs/security.md).

Ray's node binds 127.0.0.1 (fedbench.runtime.simulation.loopback), which keeps
the network out but not the host's other accounts: without a credential any
of them could call the GCS or a raylet and run code as the operator. Ray 2.52+
checks a static bearer token on its gRPC servers and its HTTP agents when
`RAY_AUTH_MODE=token`. `private_token` turns that on for one private session:

- a fresh random token per session, in a 0600 file inside the session's 0700
  folder, named by `RAY_AUTH_TOKEN_PATH`: the token is in no environment and on
  no command line, and only the operator's account (and root) can read it;
- the GCS, the raylet, the agents and the workers are processes Ray starts from
  this one, so they inherit both variables and all require the token;
- only around the session: the environment, and the two pieces of Ray's state
  in this process that read it (its C++ config, read once when Ray is imported,
  and the token it caches), are set for the session and put back after it, so
  the next run in the same process starts from what was there before.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from fedbench.runtime.environ import scoped_environ

TOKEN_FILE = "ray_auth_token"  # in the session's private folder
MODE_ENV = "RAY_AUTH_MODE"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
# Takes precedence over the path in Ray's loader: a user's own value (for their
# cluster) must not become the private node's token, so it is unset meanwhile.
TOKEN_ENV = "RAY_AUTH_TOKEN"


def write_token(folder: str) -> str:
    """A fresh token in a new 0600 file in `folder` (ours, 0700); returns its path."""
    path = os.path.join(folder, TOKEN_FILE)
    # O_EXCL | O_NOFOLLOW: a new file of ours, never one planted there, nor through a link.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


@contextlib.contextmanager
def private_token(folder: str) -> Iterator[str]:
    """Within it, a Ray node started from this process requires a token; yields its file."""
    path = write_token(folder)
    try:
        with scoped_environ({MODE_ENV: "token", PATH_ENV: path}, unset=[TOKEN_ENV]):
            _reload_ray_auth()
            yield path
    finally:
        _reload_ray_auth()  # the environment is as it was: Ray reads it again
        with contextlib.suppress(OSError):
            os.unlink(path)  # the session is over: its token opens nothing any more


def _reload_ray_auth() -> None:
    """Make this process's Ray read the authentication settings from the environment again.

    Ray's C++ config reads `RAY_AUTH_MODE` when `ray` is imported (long before a
    run starts), and its token loader caches the first token it reads: without
    this the driver would call its own node without the token, and a second
    session in the same process would send the first one's.
    """
    # Both are in Ray's compiled module, not in its stub (ray/_raylet.pyi).
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    Config.initialize("")  # every RAY_* setting from the environment, as at import
    AuthenticationTokenLoader.instance().reset_cache()
