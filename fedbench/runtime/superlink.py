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
"""

from __future__ import annotations

import argparse
import hmac
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
    """ASGI middleware: Fleet and Runtime calls pass; anything else needs the control key."""

    def __init__(self, app: ASGIApp, key: bytes, routes: frozenset[str]) -> None:
        self.app = app
        self.key = key
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan" or (
            kind == "http" and scope.get("method") == "POST" and scope.get("path") in self.routes
        ):
            await self.app(scope, receive, send)
            return
        if self._has_key(scope):
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        print(
            f"[fedbench] refused {scope.get('method', kind)} {str(scope.get('path'))[:200]!r} "
            f"from {client[0]}:{client[1]}: {REFUSED_MARK}",
            file=sys.stderr,
            flush=True,
        )
        if kind != "http":
            return  # a websocket: closed unanswered
        body = b"Forbidden: the Control API needs this run's control key\n"
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
        serve(ControlGate(app, key, open_routes(app)), *a, **kw)

    # flower-superlink builds its app and hands it to uvicorn.run: the one place to wrap it.
    uvicorn.run = gated
    sys.argv = ["flower-superlink", *rest]
    flower_superlink()


if __name__ == "__main__":
    main()
