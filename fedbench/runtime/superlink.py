"""`python -m fedbench.runtime.superlink --control-key FILE -- ARGS`: Flower's SuperLink with
a credential on its Control API, loopback included.

Flower 1.42 serves the Fleet, Control and Runtime APIs of a SuperLink on one
HTTPS port. The Fleet API checks each SuperNode's registered key and the
Runtime API the SuperExec's secret (then a per-task token), but the Control
API - which starts runs (code that runs as the operator, and on every
SuperNode), registers node keys and stops runs - authenticates nobody in
Flower's open-source build. Binding it to 127.0.0.1 keeps the network out,
not the host's other accounts: any local user with curl could start a run.

So fedbench runs Flower's own `flower-superlink` (its argument parsing and
app, unchanged) with one thing added: the ASGI app uvicorn serves is wrapped
in `ControlGate`. Without the run's control key in `x-fedbench-control-key`,
only `POST`s to the app's own Fleet and Runtime routes pass (each carries
Flower's own credential); everything else - the Control API, `/docs`,
`/openapi.json`, `/health` - is answered 403 and logged. The key is a
per-run random secret in a 0600 file (`credentials/control.secret`); fedbench's
`flwr` calls send it (fedbench.runtime.flwr_cli). The deployment checks after
start-up that a call without it is refused, and stops if it is not.

Every legitimate caller of this port - the Fleet proxy, the local SuperNodes,
the SuperExec, the ServerApp, fedbench's `flwr` calls - runs as the run's own
account; devices on the network arrive through the proxy. So before anything
else the gate asks the kernel who connected (`peer_uid`: the uid of the
calling socket in /proc/net/tcp) and answers 403 to any other account, on
every route: another local user gets no Fleet or Runtime answer either, not
even a 400 to a junk body.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

KEY_HEADER = "x-fedbench-control-key"
# Routes whose every call carries Flower's own credential (node key; SuperExec secret, task token).
OPEN_PREFIXES = ("/v1/fleet/", "/v1/runtime/")
REFUSED_MARK = "no Control API credential"
OTHER_ACCOUNT = "a call from another account"
PROC_NET = Path("/proc/net")


def _proc_address(host: str, port: int) -> str:
    """`host:port` as /proc/net/tcp{,6} print it: each 32-bit word in host byte order, hex."""
    packed = ipaddress.ip_address(host).packed
    words = (packed[i : i + 4] for i in range(0, len(packed), 4))
    return "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words) + f":{port:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the socket that connected from `client` to `server`; None if not found.

    The kernel lists every TCP socket of this network namespace with its
    owner's uid; the caller's socket is the one whose local end is `client`
    and remote end `server` (the server's own socket is the other way round).
    """
    try:
        local, remote = _proc_address(*client), _proc_address(*server)
    except ValueError:
        return None  # not an IP address (a Unix socket): nobody to vouch for
    table = "tcp6" if ":" in client[0] else "tcp"
    try:
        lines = (PROC_NET / table).read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == local and fields[2] == remote:
            return int(fields[7])
    return None


def open_routes(app: object) -> frozenset[str]:
    """The app's own POST routes under the Fleet and Runtime prefixes (exact paths).

    Read from the app, so they follow Flower's routers; a route not found
    here is not open (a call to it needs the key), never the other way round.
    """
    routes = getattr(app, "routes", ())
    try:  # FastAPI >= 0.13x keeps included routers nested: walk them
        from fastapi.routing import iter_route_contexts

        found: Any = iter_route_contexts(routes)
    except ImportError:
        found = routes
    out = set()
    for route in found:
        path, methods = getattr(route, "path", ""), getattr(route, "methods", None) or ()
        if "POST" in methods and isinstance(path, str) and path.startswith(OPEN_PREFIXES):
            out.add(path)
    return frozenset(out)


class ControlGate:
    """ASGI middleware: the run's account only; Fleet and Runtime calls pass, anything else
    needs the control key."""

    def __init__(self, app: ASGIApp, key: bytes, routes: frozenset[str]) -> None:
        self.app = app
        self.key = key
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self.app(scope, receive, send)
            return
        if (uid := self._other_account(scope)) is not None:
            await self._refuse(scope, send, f"{OTHER_ACCOUNT} (uid {uid})")
            return
        if (
            kind == "http" and scope.get("method") == "POST" and scope.get("path") in self.routes
        ) or self._has_key(scope):
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, send, REFUSED_MARK)

    def _other_account(self, scope: Scope) -> int | str | None:
        """The caller's uid when it is not this process's ("unknown" if the kernel has none)."""
        client, server = scope.get("client"), scope.get("server")
        if not client or not server:
            return "unknown"
        uid = peer_uid((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
        if uid == os.getuid():
            return None
        return "unknown" if uid is None else uid

    async def _refuse(self, scope: Scope, send: Send, why: str) -> None:
        kind = scope.get("type")
        client = scope.get("client") or ("?", 0)
        print(
            f"[fedbench] refused {scope.get('method', kind)} {str(scope.get('path'))[:200]!r} "
            f"from {client[0]}:{client[1]}: {why}",
            file=sys.stderr,
            flush=True,
        )
        if kind != "http":
            return  # a websocket: closed unanswered
        body = b"Forbidden: this SuperLink answers only its run's account, and its Control API "
        body += b"only with the run's control key\n"
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _has_key(self, scope: Scope) -> bool:
        given = [v for k, v in scope.get("headers", ()) if k.lower() == KEY_HEADER.encode()]
        return len(given) == 1 and hmac.compare_digest(given[0], self.key)


def read_key(path: Path) -> bytes:
    key = path.read_bytes().strip()
    if len(key) < 32:
        raise SystemExit(f"{path}: the control key is too short")
    return key


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m fedbench.runtime.superlink")
    p.add_argument("--control-key", type=Path, required=True, help="file holding the key")
    p.add_argument("superlink", nargs=argparse.REMAINDER, help="-- flower-superlink's arguments")
    args = p.parse_args(argv)
    rest = list(args.superlink)
    if rest and rest[0] == "--":
        rest = rest[1:]
    key = read_key(args.control_key)

    import uvicorn
    from flwr.superlink.cli.flower_superlink import flower_superlink

    serve = uvicorn.run

    def gated(app: Any, *a: Any, **kw: Any) -> None:
        # Without proxy headers the client in each request is the socket's own peer:
        # uvicorn would otherwise take it from a local caller's X-Forwarded-For, and a
        # caller could name the port of one of the run's own connections.
        kw["proxy_headers"] = False
        serve(ControlGate(app, key, open_routes(app)), *a, **kw)

    # flower-superlink builds its app and hands it to uvicorn.run: the one place to wrap it.
    uvicorn.run = gated
    sys.argv = ["flower-superlink", *rest]
    flower_superlink()


if __name__ == "__main__":
    main()
