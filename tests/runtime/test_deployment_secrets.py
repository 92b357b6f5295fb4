"""No secret of a deployment is on a command line: what `ps` shows every account.

Flower's SuperExec starts `flwr-serverapp` and each `flwr-clientapp` with
`--token <the task's token>`; fedbench's SuperExec (fedbench.runtime.superexec)
hands the token over in an inherited memfd instead. The slow test runs a
loopback deployment and, while it trains, reads the command line of every
process of the run as often as it can: no `--token` value and no long hex
string appears, the ServerApp and a ClientApp were seen (so the scan looked
where the tokens used to be), and the account `nobody` cannot read the token
through the ServerApp's descriptor. Nor does `nobody` get a Fleet or Runtime
answer from the SuperLink's own port: the gate there (fedbench.runtime.superlink)
answers only the run's account.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import re
import socket
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import psutil
import pytest
from flwr.common.args import add_args_flwr_app_common, try_obtain_flwr_app_token
from flwr.supercore.constant import TaskType
from flwr.supercore.superexec.executor import ExecutionSpec

from fedbench.runtime import entry
from fedbench.runtime.flower import node_superexec_argv, superexec_argv
from fedbench.runtime.superexec import task_argv, token_file
from fedbench.runtime.superlink import OTHER_ACCOUNT, ControlGate, peer_uid
from tests.runtime.test_deployment import follow, serve
from tests.security.test_control_api import _as_nobody

# A task token is 64 hex digits; the SuperExec and control secrets are longer still.
SECRET = re.compile(r"[0-9a-fA-F]{32,}")
TOKEN = "ab" * 32
NOBODY = pwd.getpwnam("nobody")


def _spec(task_type: TaskType, token: str = TOKEN) -> ExecutionSpec:
    return ExecutionSpec(
        task_type=task_type,
        runtime_api_address="127.0.0.1:9091",
        token=token,
        insecure=False,
        root_certificates_path="/ca.pem",
        runtime_dependency_install=False,
        parent_pid=4242,
        suppress_output=True,
        task_id=1,
    )


@pytest.mark.parametrize("task_type", [TaskType.SERVER_APP, TaskType.CLIENT_APP])
def test_flowers_app_parser_reads_the_token_from_the_descriptor(task_type: TaskType) -> None:
    fd = token_file(TOKEN)
    try:
        argv = task_argv(_spec(task_type), fd)
        assert TOKEN not in " ".join(argv) and "--token" not in argv
        launcher = entry.argv(task_type.value)  # this interpreter runs the script
        assert argv[: len(launcher)] == launcher
        # What flwr-serverapp / flwr-clientapp parse, and how they read the token.
        parser = argparse.ArgumentParser()
        parser.add_argument("--runtime-api-address")
        add_args_flwr_app_common(parser)
        args = parser.parse_args(argv[len(launcher) :])
        assert try_obtain_flwr_app_token(args) == TOKEN
        assert args.parent_pid == 4242 and args.root_certificates == "/ca.pem"
    finally:
        os.close(fd)


def test_the_deployments_superexecs_are_fedbenchs() -> None:
    for argv in (
        superexec_argv("127.0.0.1:1", Path("ca.pem"), Path("s"), 1),
        node_superexec_argv(2, Path("s"), 1),
    ):
        assert argv[1:3] == ["-m", "fedbench.runtime.superexec"], argv


def _as(uid: int, gid: int) -> None:
    os.setgid(gid)
    os.setuid(uid)


def _connect_as_nobody(address: tuple[str, int]) -> tuple[int, int]:
    """A child, as `nobody`, that connects to `address` and holds the connection open.

    Returns its pid and the write end of a pipe: closing it ends the child.
    """
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(stop_w)  # or it would wait for itself
        _as(NOBODY.pw_uid, NOBODY.pw_gid)
        with socket.create_connection(address):
            os.write(ready_w, b"x")
            os.read(stop_r, 1)
        os._exit(0)
    os.read(ready_r, 1)
    for fd in (ready_r, ready_w, stop_r):
        os.close(fd)
    return child, stop_w


def _through_gate(gate: ControlGate, client: tuple[str, int], server: tuple[str, int]) -> int:
    """The status the gate answers a Fleet call from `client` to `server` with."""
    scope = {"type": "http", "method": "POST", "path": "/v1/fleet/pull-messages"}
    scope |= {"client": client, "server": server, "headers": []}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    return int(sent[0]["status"])


def test_the_superlink_answers_only_its_own_account() -> None:
    if os.geteuid() != 0:
        pytest.skip("acting as another account needs root")

    async def flower(scope: Any, receive: Any, send: Any) -> None:  # stands for Flower's app
        await send({"type": "http.response.start", "status": 200, "headers": []})

    gate = ControlGate(flower, b"k" * 32, frozenset({"/v1/fleet/pull-messages"}))
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = server.getsockname()
        with socket.create_connection(address) as own:
            child, stop = _connect_as_nobody(address)
            try:
                mine = own.getsockname()
                theirs = next(c for c in (server.accept()[1], server.accept()[1]) if c != mine)
                assert peer_uid(mine, address) == os.getuid()
                assert peer_uid(theirs, address) == NOBODY.pw_uid
                assert _through_gate(gate, mine, address) == 200
                assert _through_gate(gate, theirs, address) == 403
                assert _through_gate(gate, ("127.0.0.1", 1), address) == 403  # no such socket
            finally:
                os.close(stop)
                os.waitpid(child, 0)


def _secrets_in(cmdline: list[str]) -> list[str]:
    """What on this command line is, or looks like, a secret."""
    found = [cmdline[i + 1] for i, a in enumerate(cmdline[:-1]) if a == "--token"]
    found += [a for a in cmdline if a.startswith("--token=")]
    return found + [m.group(0) for a in cmdline for m in SECRET.finditer(a)]


class Scan:
    """Every command line of `pid`'s descendants, read over and over until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: dict[int, list[str]] = {}
        self.leaks: list[str] = []
        self.nobody_read: list[str] = []
        self.nobody_tried = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                return
            for p in children:
                try:
                    cmdline = Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                argv = [a.decode(errors="replace") for a in cmdline if a]
                if argv and argv != self.seen.get(p.pid):
                    self.seen[p.pid] = argv
                    if _secrets_in(argv):
                        self.leaks.append(f"{p.pid} {' '.join(argv)[:300]}")
                    self._try_as_nobody(p.pid, argv)
            time.sleep(0.02)

    def _try_as_nobody(self, pid: int, argv: list[str]) -> None:
        """`nobody` opens the task's token file through /proc: it must be refused."""
        if "--token-file" not in argv or os.geteuid() != 0:
            return
        path = argv[argv.index("--token-file") + 1].replace("/self/", f"/{pid}/")
        self.nobody_tried += 1
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            os.close(read)
            try:
                _as(NOBODY.pw_uid, NOBODY.pw_gid)
                os.write(write, b"read:" + Path(path).read_bytes()[:8])
            except OSError as exc:
                os.write(write, f"refused: {exc.strerror}".encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            answer = f.read().decode(errors="replace")
        os.waitpid(child, 0)
        if not answer.startswith("refused"):
            self.nobody_read.append(f"{path}: {answer}")


@pytest.mark.slow
def test_no_token_on_any_command_line_during_a_deployment(tmp_path: Path) -> None:
    server, lines = serve(
        None,
        None,
        [],
        tmp_path / "run",
        "experiment=smoke",
        "fleet.devices=[{profile:rpi4,count:1},{profile:pixel2,count:1}]",
        "strategy.clients_per_round=2",
        "scenario.days=1",
        "scenario.pretrain.epochs=0",
    )
    scan = Scan(server.pid)
    thread = threading.Thread(target=scan.run, daemon=True)
    thread.start()
    nobody: dict[str, str | None] = {}

    def on_line(line: str) -> None:
        if "deployment: started Flower run" in line and not nobody:
            config = tomllib.loads((tmp_path / "run" / "flower" / "config.toml").read_text())
            link = config["superlink"]["fedbench"]["address"]
            for path in ("/v1/fleet/pull-messages", "/v1/runtime/acquire-task"):
                nobody[path] = _as_nobody(f"https://{link}{path}")

    try:
        follow(server, lines, on_line, timeout_s=300)
    finally:
        scan.done.set()
        thread.join(timeout=10)
        if server.poll() is None:
            server.kill()
    # Flower's scripts run as `python -m fedbench.runtime.entry flwr-serverapp ...`.
    commands = {Path(a).name for argv in scan.seen.values() for a in argv[:4]}
    assert {"flwr-serverapp", "flwr-clientapp"} <= commands, sorted(commands)
    assert scan.leaks == [], "\n".join(scan.leaks)
    assert scan.nobody_read == [] and (scan.nobody_tried > 0 or os.geteuid() != 0)
    # Flower itself answers these with 400 to an empty body; the gate never lets them in.
    assert nobody and all(status in (None, "403") for status in nobody.values()), nobody
    superlink = (tmp_path / "run" / "logs" / "superlink.log").read_text()
    assert os.geteuid() != 0 or OTHER_ACCOUNT in superlink
