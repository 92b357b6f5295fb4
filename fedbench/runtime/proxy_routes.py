"""The only requests a deployment's public port forwards: the Fleet API of Flower 1.41.

A SuperNode calls these (flwr.supernode.fleet_http_client), each a `POST`
of a protobuf body; the SuperLink checks every one against the node's
registered key. Control API, Runtime (ServerAppIo) API, health, OpenAPI
schema and docs are not in the list, so the public port refuses them.
`tests/runtime/test_proxy.py` checks the list against Flower's own router.
"""

from __future__ import annotations

FLEET_PREFIX = "/v1/fleet/"
FLEET_ROUTES: frozenset[str] = frozenset(
    FLEET_PREFIX + name
    for name in (
        "register-node",  # refused by the SuperLink under node authentication
        "activate-node",
        "deactivate-node",
        "unregister-node",  # refused by the SuperLink under node authentication
        "send-node-heartbeat",
        "pull-messages",
        "push-messages",
        "get-run",
        "get-fab",
        "push-object",
        "pull-object",
        "confirm-message-received",
    )
)


def allowed(method: str, target: str) -> bool:
    """Whether a request line's method and target may pass (exact paths, no query)."""
    return method == "POST" and target in FLEET_ROUTES
