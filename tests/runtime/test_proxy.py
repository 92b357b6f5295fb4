"""The Fleet-only proxy: its route list is Flower's, and it refuses everything else.

The Python proxy is run against a tiny TLS upstream that echoes what it
got; the nginx one (when installed) against the same upstream. Seconds,
no Flower server.
"""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fedbench.runtime.flower import free_port
from fedbench.runtime.processes import ProcessSet
from fedbench.runtime.proxy import Gate, argv, choose
from fedbench.runtime.proxy_routes import FLEET_ROUTES, allowed
from fedbench.security import TlsFiles, issue_tls


def test_the_route_list_is_flowers_fleet_api() -> None:
    from fastapi.routing import APIRoute
    from flwr.superlink.routers.fleet.router import router

    flower = {r.path for r in router.routes if isinstance(r, APIRoute)}
    assert flower == set(FLEET_ROUTES)
    assert all(m == {"POST"} for r in router.routes if isinstance(r, APIRoute) for m in [r.methods])
    assert allowed("POST", "/v1/fleet/pull-messages")
    assert not allowed("GET", "/v1/fleet/pull-messages")
    assert not allowed("POST", "/v1/control/start-run")
    assert not allowed("POST", "/v1/fleet/../control/start-run")
    assert not allowed("POST", "/v1/fleet/pull-messages?x=1")


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
        body = self.rfile.read(int(self.headers["Content-Length"]))
        reply = self.path.encode() + b" " + body
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, TlsFiles]]:
    tls = issue_tls(tmp_path_factory.mktemp("inner"), ["localhost", "127.0.0.1"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(tls.server_cert, tls.server_key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], tls
    server.shutdown()


def _request(port: int, ca: Path, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    conn.request(method, path, body=body if method == "POST" else None)
    response = conn.getresponse()
    return response.status, response.read()


KINDS = [
    "python",
    pytest.param(
        "nginx",
        marks=pytest.mark.skipif(
            shutil.which("nginx") is None, reason="nginx not installed (the python proxy is used)"
        ),
    ),
]


@pytest.mark.parametrize("kind", KINDS)
def test_only_fleet_posts_pass_and_refusals_are_logged(
    kind: str, upstream: tuple[int, TlsFiles], tmp_path: Path
) -> None:
    up_port, inner = upstream
    public = issue_tls(tmp_path / "public", ["127.0.0.1"])
    port = free_port()
    gate = Gate(
        "127.0.0.1", port, public.server_cert, public.server_key, up_port, inner.ca_cert, tmp_path
    )
    procs = ProcessSet()
    proc = procs.start("proxy", argv(kind, gate), {}, tmp_path / "proxy.log")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = _request(
                    port, public.ca_cert, "POST", "/v1/fleet/get-run", b"x" * 70_000
                )
                break
            except OSError:
                assert proc.popen.poll() is None, (tmp_path / "proxy.log").read_text()
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert status == 200 and body == b"/v1/fleet/get-run " + b"x" * 70_000
        for method, path in [
            ("POST", "/v1/control/start-run"),
            ("POST", "/v1/control/register-node"),
            ("POST", "/v1/runtime/acquire-task"),
            ("GET", "/openapi.json"),
            ("GET", "/v1/fleet/get-run"),
            ("POST", "/v1/fleet/%2e%2e/control/stop-run"),
        ]:
            status, _ = _request(port, public.ca_cert, method, path, b"{}")
            assert status == 403, (method, path)
        time.sleep(0.3)  # nginx writes its log lines as it goes
        log = gate.refused_log.read_text()
        for path in ("/v1/control/start-run", "/openapi.json", "/v1/runtime/acquire-task"):
            assert path in log
        assert len(log.splitlines()) == 6
    finally:
        procs.stop()


def test_choose_refuses_unknown_proxies() -> None:
    from fedbench.errors import FedbenchError

    with pytest.raises(FedbenchError, match="runtime.proxy='envoy'; valid: auto, nginx, python"):
        choose("envoy")
    assert choose("python") == "python"
    assert choose("auto") == ("nginx" if shutil.which("nginx") else "python")


def test_a_runs_processes_die_with_its_driver_even_on_sigkill(tmp_path: Path) -> None:
    """SIGKILL the driver: its child goes with it (PR_SET_PDEATHSIG), and so does the
    child's own helper, started in a session of its own and re-parented to init (the
    watchdog finds it by the run's token in its environment)."""
    import psutil

    helper = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    child = (
        "import subprocess, sys, time\n"
        f"h = subprocess.Popen([sys.executable, '-c', {helper!r}], start_new_session=True)\n"
        "print(h.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    driver = (
        "import os, sys, time\n"
        "from fedbench.runtime.processes import ProcessSet\n"
        "p = ProcessSet()\n"
        f"c = p.start('child', [sys.executable, '-c', {child!r}], dict(os.environ), None,\n"
        "            stdout=sys.stdout)\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pids = {int(parent.stdout.readline()), int(parent.stdout.readline())}
    procs = [psutil.Process(pid) for pid in pids]
    assert all(p.is_running() for p in procs)
    parent.kill()
    parent.wait()
    _, alive = psutil.wait_procs(procs, timeout=5)
    assert not alive, "a process outlived its SIGKILLed driver"
