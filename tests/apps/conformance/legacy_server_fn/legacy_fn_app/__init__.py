"""Conformance app: legacy `ServerApp(server_fn=...)` and a NumPyClient `client_fn`."""
