"""`python -m fedbench.runtime.fleet_proxy`: the Python Fleet API gate (nginx's stand-in).

    python -m fedbench.runtime.fleet_proxy --listen 0.0.0.0:9092 \\
        --cert server.pem --key server.key \\
        --upstream 127.0.0.1:40123 --upstream-ca internal-ca.pem --refused-log refused.log

A TLS server that forwards one request per connection to the SuperLink
(TLS, verified against its own CA) when it is a `POST` to one of the
Fleet API routes SuperNodes use, and answers everything else - the Control
API (`flwr run`, `flwr supernode register`, `flwr stop`), the Runtime API,
`/openapi.json`, `/docs` - with 403, one line per refusal in the refused
log. Headers are bounded in size and time, request bodies must declare
their length (SuperNodes send `Content-Length`), and the upstream request
is marked `Connection: close` so the response can be relayed to its end.
Built on asyncio and ssl alone; fedbench uses nginx instead where it is
installed (fedbench.runtime.proxy).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from fedbench.runtime.proxy_routes import allowed

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 3600.0  # a pull may wait long for the server
CHUNK = 1 << 16


class Gate:
    def __init__(
        self, upstream: tuple[str, int], upstream_tls: ssl.SSLContext, refused_log: Path
    ) -> None:
        self.upstream = upstream
        self.upstream_tls = upstream_tls
        self.refused_log = refused_log

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            if len(head) > MAX_HEAD:
                raise ValueError("header too large")
            method, path, headers = _parse(head)
            if not allowed(method, path):
                self._refuse(who, method, path)
                await _answer(writer, 403, "Forbidden: only the Fleet API is served here")
                return
            length = headers.get("content-length")
            if "transfer-encoding" in headers or (length is None and method == "POST"):
                await _answer(writer, 411, "Length Required")
                return
            await self._forward(reader, writer, head, int(length or 0))
        except (
            TimeoutError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
            ConnectionError,
            ssl.SSLError,
        ):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: bytes,
        length: int,
    ) -> None:
        host, port = self.upstream
        up_reader, up_writer = await asyncio.open_connection(
            host, port, ssl=self.upstream_tls, server_hostname="localhost"
        )
        try:
            up_writer.write(_close_after(head))
            left = length
            while left > 0:
                data = await asyncio.wait_for(reader.read(min(CHUNK, left)), IDLE_TIMEOUT_S)
                if not data:
                    return
                up_writer.write(data)
                await up_writer.drain()
                left -= len(data)
            await up_writer.drain()
            while True:
                data = await asyncio.wait_for(up_reader.read(CHUNK), IDLE_TIMEOUT_S)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    def _refuse(self, who: str, method: str, path: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with self.refused_log.open("a") as f:
            f.write(f"{stamp} {who} {method} {path[:200]!r} 403\n")


def _parse(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x request")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError("malformed header")
        key = name.strip().lower()
        if key in headers and key == "content-length":
            raise ValueError("repeated content-length")  # request smuggling
        headers[key] = value.strip()
    return parts[0], parts[1], headers


def _close_after(head: bytes) -> bytes:
    """The request head with `Connection: close` (one request per upstream connection)."""
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if line and not line.lower().startswith(b"connection:")]
    return b"\r\n".join([lines[0], *kept, b"Connection: close", b"", b""])


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    body = text.encode()
    reason = {403: "Forbidden", 411: "Length Required"}.get(status, "Error")
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


async def serve(args: argparse.Namespace) -> None:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.minimum_version = ssl.TLSVersion.TLSv1_2
    server_tls.load_cert_chain(args.cert, args.key)
    upstream_tls = ssl.create_default_context(cafile=str(args.upstream_ca))
    gate = Gate(_host_port(args.upstream), upstream_tls, args.refused_log)
    host, port = _host_port(args.listen)
    server = await asyncio.start_server(
        gate.handle, host, port, ssl=server_tls, limit=MAX_HEAD, reuse_address=True
    )
    print(f"fleet proxy on {args.listen} -> {args.upstream}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fedbench.runtime.fleet_proxy")
    p.add_argument("--listen", required=True, help="HOST:PORT to serve devices on")
    p.add_argument("--cert", type=Path, required=True)
    p.add_argument("--key", type=Path, required=True)
    p.add_argument("--upstream", required=True, help="the SuperLink's HOST:PORT")
    p.add_argument("--upstream-ca", type=Path, required=True)
    p.add_argument("--refused-log", type=Path, required=True)
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
