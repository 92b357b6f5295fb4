"""No credential, no Control API - on 127.0.0.1 too - and no task from a node's Runtime API.

A deployment runs (fedbench's own path: `python -m fedbench runtime=deployment`);
while it trains, a local client with everything the run folder shows but not
the run's control key tries what the issue's attacker did: `flwr ls`,
`flwr run` of an app, a raw `POST /v1/control/start-run` (as `nobody`, with
curl, where the test runs as root), and taking a ClientApp task from a
SuperNode's local Runtime API without the SuperExec secret. Every call is
refused, the refusals are in refused.log, and fedbench's own run completes.
"""

from __future__ import annotations

import csv
import http.client
import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from fedbench.runtime.flower import CONNECTION, FlowerCli, _json_documents, tool
from tests.runtime.test_deployment import follow, serve

pytestmark = pytest.mark.slow

PROTOBUF = {"content-type": "application/protobuf", "accept": "application/protobuf"}


def _post(host: str, port: int, path: str, tls: bool) -> int:
    import ssl

    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(
            host, port, context=ssl._create_unverified_context(), timeout=30
        )
        if tls
        else http.client.HTTPConnection(host, port, timeout=30)
    )
    conn.request("POST", path, body=b"", headers=PROTOBUF)
    status = conn.getresponse().status
    conn.close()
    return status


def _as_nobody(url: str) -> str | None:
    """`curl -X POST url` as the unprivileged account `nobody`; its HTTP status."""
    if os.geteuid() != 0 or not (shutil.which("setpriv") and shutil.which("curl")):
        return None
    done = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "curl", "-sk"]
        + ["-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]
        + ["-H", "content-type: application/protobuf", url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    return done.stdout.strip()


def _node_ports(run_dir: Path) -> list[int]:
    """The local Runtime API ports of the run's SuperNodes, from their command lines."""
    ports = []
    for row in csv.DictReader((run_dir / "logs" / "processes.csv").open()):
        argv = json.loads(row["cmdline"])
        if any(a.endswith("flower-supernode") for a in argv) and "--port" in argv:
            ports.append(int(argv[argv.index("--port") + 1]))
    return sorted(set(ports))


def _attack(run_dir: Path, outside: Path, app: Path) -> dict[str, object]:
    """Everything a local account without the run's control key tries; what each got."""
    config = tomllib.loads((run_dir / "flower" / "config.toml").read_text())
    connection = config["superlink"][CONNECTION]
    address, ca = connection["address"], Path(connection["root-certificates"])
    host, _, port = address.rpartition(":")
    cli = FlowerCli(outside, address, ca)  # the run's connection, without the key
    docs = cli.answers([["ls", CONNECTION], ["supernode", "list", CONNECTION]])
    run = subprocess.run(
        [*tool("flwr"), "run", str(app), CONNECTION, "--format", "json"],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=outside,
        timeout=120,
    )
    docs += _json_documents(run.stdout)
    return {
        "cli": docs,
        "start-run": _post(host, int(port), "/v1/control/start-run", tls=True),
        "openapi": _post(host, int(port), "/openapi.json", tls=True),
        "nobody": _as_nobody(f"https://{address}/v1/control/start-run"),
        "node tasks": [
            _post("127.0.0.1", p, "/v1/runtime/acquire-task", tls=False)
            for p in _node_ports(run_dir)
        ],
        "nobody node": [
            _as_nobody(f"http://127.0.0.1:{p}/v1/runtime/acquire-task")
            for p in _node_ports(run_dir)
        ],
    }


def test_a_local_account_without_the_key_cannot_submit_or_take_tasks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    app = tmp_path / "app"
    shutil.copytree(Path(__file__).parents[1] / "apps" / "quickstart", app)
    server, lines = serve(
        None,
        None,
        [],
        run_dir,
        "experiment=smoke",
        "fleet.devices=[{profile:rpi4,count:1},{profile:pixel2,count:1}]",
        "strategy.clients_per_round=2",
        "scenario.days=1",
        "scenario.pretrain.epochs=0",
    )
    got: dict[str, object] = {}

    def on_line(line: str) -> None:
        if "deployment: started Flower run" in line and not got:
            got.update(_attack(run_dir, tmp_path / "outside", app))

    try:
        follow(server, lines, on_line, timeout_s=600)  # fedbench's own run completes
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert got, "the run never started"
    docs = got["cli"]
    assert isinstance(docs, list) and len(docs) == 3, docs
    assert not any(d.get("success") for d in docs), docs
    assert all("403 Forbidden" in str(d.get("error-message")) for d in docs), docs
    assert got["start-run"] == 403 and got["openapi"] == 403
    assert got["nobody"] in (None, "403"), got
    assert got["node tasks"] and all(s == 401 for s in got["node tasks"]), got  # type: ignore[union-attr]
    assert all(s in (None, "401") for s in got["nobody node"]), got  # type: ignore[union-attr]
    refused = (run_dir / "refused.log").read_text()
    assert "/v1/control/start-run" in refused and "no Control API credential" in refused
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
