"""A simulation's private Ray answers nobody without the run's token, on every port.

Before, Ray's servers bound 127.0.0.1 but authenticated nobody: any local
account could call the GCS, the raylet or a worker (a GetAllNodeInfo without a
credential was answered OK). Now, while the run trains, every listening TCP
socket of the run's process tree is called without a token - each gRPC port
with a read-only method of every Ray service, the runtime-env agent's HTTP
port with a request - and refuses it; with the token from the run's private
folder the same call is answered (so the refusal is the token's). The run then
completes, and the token is on no command line, in none of Ray's logs and in no
file of the run.
"""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

from tests.runtime.ray_session import (
    command_line,
    listening,
    ray_folder,
    start_smoke,
    wait_for_actors,
)

pytestmark = pytest.mark.slow

# One harmless method of each Ray gRPC service that listens on TCP: a port answers
# UNIMPLEMENTED for the services it does not serve, and the auth check for its own.
METHODS = (
    "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",  # GCS
    "/ray.rpc.NodeManagerService/GetSystemConfig",  # raylet: node manager
    "/ray.rpc.ObjectManagerService/FreeObjects",  # raylet: object manager (frees nothing)
    "/ray.rpc.CoreWorkerService/NumPendingTasks",  # the driver, every worker and actor
)
HTTP_AGENTS = ("RuntimeEnvAgent",)  # aiohttp, behind Ray's token middleware
# Where the run keeps its token (fedbench.runtime.ray_auth.TOKEN_FILE), spelled out so
# that the test runs, and fails, on code without it.
TOKEN_FILE = "ray_auth_token"


def _grpc(port: int, method: str, token: str | None) -> grpc.StatusCode:
    """The status of one call with an empty request, with or without the token."""
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(method)
        try:
            call(b"", timeout=10, metadata=metadata)
        except grpc.RpcError as e:
            return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _answers(port: int, token: str | None) -> set[grpc.StatusCode]:
    """What the port's own services answer (UNIMPLEMENTED: a service it does not serve)."""
    return {_grpc(port, m, token) for m in METHODS} - {grpc.StatusCode.UNIMPLEMENTED}


def _http(port: int, token: str | None) -> int:
    """HTTP status of a GET of a path no agent serves: 404 once past the token check."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/fedbench-probe")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as e:
        return e.code


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""  # removed meanwhile


def _probe(name: str, port: int, token: str | None) -> object:
    """A port's answer: an HTTP status for the HTTP agents, gRPC statuses for the others."""
    return _http(port, token) if name.endswith(HTTP_AGENTS) else _answers(port, token)


def test_rays_ports_refuse_a_caller_without_the_runs_token(tmp_path: Path) -> None:
    proc, run_dir, out = start_smoke(tmp_path, days=3)
    try:
        tree = wait_for_actors(proc, out)
        sockets = listening(tree)
        refused = {(name, port): _probe(name, port, None) for name, _, port in sockets}
        folder = ray_folder(tree)
        token_file = folder.parent / TOKEN_FILE
        token = token_file.read_text() if token_file.exists() else None
        mode = token_file.stat().st_mode & 0o777 if token else None
        answered = {(name, port): _probe(name, port, token) for name, _, port in sockets}
        # Every command line on the host, as any account reads them (`ps`), and the run's.
        ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
        command_lines = [ps, *map(command_line, tree)]
        ray_logs = [p for p in folder.rglob("*") if p.is_file()]  # Ray's session logs
        logged = [p for p in ray_logs if token and token.encode() in _read(p)]
        rc = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    shown = "\n".join(
        f"{n} {p}: {r}, with the token {answered[n, p]}" for (n, p), r in refused.items()
    )
    gcs = [key for key in refused if key[0] == "gcs_server"]
    assert gcs and all(refused[k] == {grpc.StatusCode.UNAUTHENTICATED} for k in gcs), shown
    # The GCS, the raylet's two ports, the driver, the actors and the runtime-env agent.
    assert len(sockets) >= 5, shown
    for key, status in refused.items():
        assert status in ({grpc.StatusCode.UNAUTHENTICATED}, 401), shown
        assert answered[key] in ({grpc.StatusCode.OK}, 404), shown
    assert mode == 0o600, mode
    assert rc == 0, out.read_text()[-3000:]
    assert token and len(token) == 64
    assert not any(token in line for line in command_lines)
    assert len(ray_logs) > 5 and not logged, logged
    files = [out, *(p for p in run_dir.rglob("*") if p.is_file())]
    assert not [p for p in files if token.encode() in p.read_bytes()]
    assert not token_file.exists()  # the private folder went with the run
