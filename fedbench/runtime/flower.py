"""Flower 1.42's deployment tools, as fedbench drives them.

- `flower-superlink`: one HTTPS server (Fleet, Control and Runtime APIs on
  one port) with `--enable-supernode-auth`: only SuperNodes whose public
  key was registered through the Control API may join. fedbench binds it
  to 127.0.0.1, runs it with a credential on its Control API
  (fedbench.runtime.superlink: a per-run control key, sent by fedbench's own
  `flwr` calls, fedbench.runtime.flwr_cli) and puts a Fleet-only proxy in
  front (fedbench.runtime.proxy).
  `--isolation process` plus `--superexec-auth-secret-file`: only a
  SuperExec holding the run's generated secret may take the ServerApp task
  (Flower ignores the secret with `--isolation subprocess`), so fedbench
  starts that SuperExec itself, which starts `flwr-serverapp`: Flower's
  SuperExec loop, run by fedbench.runtime.superexec so that the task token
  reaches `flwr-serverapp` (and `flwr-clientapp`) by an inherited file
  descriptor, never on a command line `ps` shows every account;
  `--disable-runtime-dependency-installation` keeps it from `uv sync`-ing
  the app (fedbench is installed already).
- `flower-supernode`: joins with `--root-certificates` (the CA that signed
  the SuperLink's certificate) and `--auth-supernode-private-key`; its
  `--node-config` is what the ClientApp reads as `context.node_config`;
  `--port` is its own local Runtime API, one free port per node. Left to
  itself (`--isolation subprocess`) that API hands the ClientApp's task,
  model included, to any local caller (Flower ignores the SuperExec secret
  there); fedbench runs it with `--isolation process` and the run's secret,
  and starts the node's SuperExec itself (`node_superexec_argv`).
- `flwr` (the CLI) reads named SuperLink connections from
  `$FLWR_HOME/config.toml`; fedbench gives each run its own FLWR_HOME in
  the run folder with one connection, `fedbench`, at an explicit address, so
  `flwr` never starts a detached local SuperLink of its own.
  `flwr supernode register KEY.pub` authorises a node,
  `flwr supernode ls --format json` shows which are online, and
  `flwr run APP fedbench --run-config FILE.toml --stream` submits the app
  (a FAB built from APP's pyproject.toml) and streams the ServerApp's log
  until the run ends.

The app submitted is a bundle folder (fedbench.runtime.bundle). The
experiment travels as the run config key `fedbench-config` (JSON), in a TOML
file so no shell quoting is involved.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from fedbench.errors import FedbenchError
from fedbench.experiment.codec import EXPERIMENT_KEY
from fedbench.runtime import entry
from fedbench.runtime.flwr_cli import KEY_ENV

CONNECTION = "fedbench"
IN_MEMORY_DB = ":flwr-in-memory:"
# No network calls home from any process we start (telemetry, update check).
FLOWER_ENV: dict[str, str] = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "PYTHONUNBUFFERED": "1",
}
RUN_STARTED = re.compile(r"Successfully started run (\d+)")
ACTIVATED = re.compile(r"\[Fleet\.ActivateNode\] Activated node_id=(\d+)")
DEACTIVATED = re.compile(r"\[Fleet\.DeactivateNode\] Deactivated node_id=(\d+)")
# What the SuperLink logs when a node with an unregistered key tries to join.
REFUSED = re.compile(r"ApiError:2004|No SuperNode found with the given public key")
# flower-supernode's message when the SuperLink did not activate it (its exit
# status is 1 for every error, so the output is what tells).
NOT_ADMITTED = "Exit Code: 305"


def tool(name: str) -> list[str]:
    """The command line of a Flower executable, run by this interpreter (runtime/entry.py)."""
    try:
        return entry.argv(name)
    except entry.NoSuchScript:
        raise FedbenchError(
            f"'{name}' not found; install Flower (pip install 'flwr>=1.41,<2')"
        ) from None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def node_config_arg(values: Mapping[str, str | int | float | bool]) -> str:
    """`--node-config` text: space-separated TOML key=value pairs."""
    parts = []
    for key, value in values.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", key):
            raise FedbenchError(f"node config key {key!r}: use letters, digits, '-' or '_'")
        # Flower splits the text with a regex that cannot see escaped quotes.
        if isinstance(value, str) and (set(value) & set('"\\') or not value.isprintable()):
            raise FedbenchError(f"node config {key}={value!r}: no quotes or backslashes")
        # JSON string and number literals are valid TOML literals too.
        parts.append(f"{key}={json.dumps(value)}")
    return " ".join(parts)


def superlink_argv(
    host: str, port: int, ca: Path, cert: Path, key: Path, secret: Path, control_key: Path
) -> list[str]:
    """Flower's SuperLink behind the control-key gate (fedbench.runtime.superlink)."""
    tool("flower-superlink")  # Flower is installed (a clear error otherwise)
    gate = [sys.executable, "-m", "fedbench.runtime.superlink", "--control-key", str(control_key)]
    return [
        *gate,
        "--",
        "--ssl-ca-certfile",
        str(ca),
        "--ssl-certfile",
        str(cert),
        "--ssl-keyfile",
        str(key),
        "--enable-supernode-auth",
        "--disable-runtime-dependency-installation",
        "--isolation",
        "process",
        "--superexec-auth-secret-file",
        str(secret),
        "--database",
        IN_MEMORY_DB,
        "--host",
        host,
        "--port",
        str(port),
    ]


def _superexec(task_command: str) -> list[str]:
    """fedbench's SuperExec: Flower's, with each task token off the command line (superexec.py)."""
    tool(task_command)  # what it will start is installed (a clear error otherwise)
    return [sys.executable, "-m", "fedbench.runtime.superexec"]


def superexec_argv(runtime_api: str, ca: Path, secret: Path, parent_pid: int) -> list[str]:
    """The SuperExec that runs the ServerApp of each run (ends with `parent_pid`)."""
    return [
        *_superexec("flwr-serverapp"),
        "--runtime-api-address",
        runtime_api,
        "--root-certificates",
        str(ca),
        "--superexec-auth-secret-file",
        str(secret),
        "--parent-pid",
        str(parent_pid),
    ]


def node_superexec_argv(runtime_port: int, secret: Path, parent_pid: int) -> list[str]:
    """The SuperExec that runs a SuperNode's ClientApps, holding the run's secret.

    The node's Runtime API is plain HTTP on 127.0.0.1 (as Flower's own
    subprocess mode runs it); the secret signs the task requests on it.
    """
    return [
        *_superexec("flwr-clientapp"),
        "--insecure",
        "--runtime-api-address",
        f"127.0.0.1:{runtime_port}",
        "--superexec-auth-secret-file",
        str(secret),
        "--parent-pid",
        str(parent_pid),
    ]


def supernode_argv(
    superlink: str,
    node_config: Mapping[str, str | int | float | bool],
    runtime_port: int,
    root_certificates: Path | None,
    auth_key: Path | None,
    max_wait_s: float | None = None,
    superexec_secret: Path | None = None,
) -> list[str]:
    """A SuperNode; without `root_certificates` it connects insecurely (no TLS).

    With `superexec_secret` its Runtime API serves only a SuperExec holding
    the secret (`--isolation process`: start `node_superexec_argv` beside it).
    """
    argv = [*tool("flower-supernode"), "--superlink", superlink, "--port", str(runtime_port)]
    if superexec_secret is not None:
        argv += ["--isolation", "process", "--superexec-auth-secret-file", str(superexec_secret)]
    argv += ["--root-certificates", str(root_certificates)] if root_certificates else ["--insecure"]
    if auth_key is not None:
        argv += ["--auth-supernode-private-key", str(auth_key)]
    if node_config:
        argv += ["--node-config", node_config_arg(node_config)]
    if max_wait_s is not None:
        argv += ["--max-wait-time", f"{max_wait_s:g}"]
    return argv


def write_run_config(path: Path, experiment_json: str) -> Path:
    """The run config `flwr run` submits: the experiment, in a TOML file (no shell quoting)."""
    path.write_bytes(tomli_w.dumps({EXPERIMENT_KEY: experiment_json}).encode())
    return path


def _json_documents(text: str) -> list[dict[str, Any]]:
    """The JSON objects printed one after the other in `text` (other lines skipped)."""
    decoder = json.JSONDecoder()
    docs: list[dict[str, Any]] = []
    at = text.find("{")
    while at >= 0:
        try:
            doc, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        if isinstance(doc, dict):
            docs.append(doc)
        at = text.find("{", end)
    return docs


class FlowerCli:
    """The `flwr` CLI against one SuperLink, with a FLWR_HOME of its own.

    With `control_key` every call sends the run's control key (fedbench.runtime.flwr_cli).
    """

    def __init__(
        self, home: Path, address: str, root_certificates: Path, control_key: Path | None = None
    ) -> None:
        self.control_key = control_key
        self.home = home.resolve()
        home.mkdir(parents=True, exist_ok=True)
        config = {
            "superlink": {
                "default": CONNECTION,
                CONNECTION: {"address": address, "root-certificates": str(root_certificates)},
            }
        }
        (home / "config.toml").write_bytes(tomli_w.dumps(config).encode())

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **FLOWER_ENV, "FLWR_HOME": str(self.home)}

    @property
    def cli_env(self) -> dict[str, str]:
        """`env`, plus where the `flwr` calls find the control key."""
        if self.control_key is None:
            return self.env
        return {**self.env, KEY_ENV: str(self.control_key)}

    def _json(self, args: Sequence[str], timeout: float = 60.0) -> dict[str, Any]:
        return self._batch([list(args)], timeout)[0]

    def _batch(
        self, commands: Sequence[Sequence[str]], timeout: float = 120.0
    ) -> list[dict[str, Any]]:
        """Several `flwr ... --format json` commands in one process (flwr_batch.py)."""
        docs = self.answers(commands, timeout)
        for command, doc in zip(commands, docs, strict=True):
            if not doc.get("success", False):
                detail = str(doc.get("error-message") or doc).strip()
                raise FedbenchError(f"`flwr {' '.join(command)}` failed: {detail[-400:]}")
        return docs

    def answers(
        self, commands: Sequence[Sequence[str]], timeout: float = 120.0
    ) -> list[dict[str, Any]]:
        """Each command's JSON document, failures included (`success: false`)."""
        full = [[*c, "--format", "json"] for c in commands]
        out = subprocess.run(
            [sys.executable, "-m", "fedbench.runtime.flwr_batch", json.dumps(full)],
            capture_output=True,
            text=True,
            env=self.cli_env,
            timeout=timeout,
            # Not the user's cwd: `flwr` rewrites a pyproject.toml it finds there
            # (moving its federations to Flower's own config).
            cwd=self.home,
        )
        docs = _json_documents(out.stdout)
        if len(docs) != len(full):
            detail = (out.stderr or out.stdout).strip()[-400:]
            raise FedbenchError(f"`flwr {' '.join(commands[0])}` ... failed: {detail}")
        return docs

    def register(self, public_keys: Sequence[Path]) -> dict[Path, int]:
        """Register node public keys; node id per key."""
        if not public_keys:
            return {}
        docs = self._batch([["supernode", "register", str(p), CONNECTION] for p in public_keys])
        return {p: int(d["node-id"]) for p, d in zip(public_keys, docs, strict=True)}

    def nodes(self) -> dict[int, str]:
        """Node id -> status (registered, online, offline, unregistered)."""
        data = self._json(["supernode", "list", CONNECTION])
        return {int(n["node-id"]): str(n["status"]) for n in data.get("nodes", [])}

    def run_status(self, run_id: int) -> tuple[str, str]:
        data = self._json(["ls", CONNECTION, "--run-id", str(run_id)])
        runs = data.get("runs") or [{}]
        return str(runs[0].get("status", "unknown")), str(runs[0].get("status-details", ""))

    def run_argv(self, app: Path, run_config: Path) -> list[str]:
        """`flwr run APP --stream` (run with `cli_env`: it sends the control key)."""
        return [
            sys.executable,
            "-m",
            "fedbench.runtime.flwr_cli",
            "run",
            str(app.resolve()),  # absolute: flwr runs in its FLWR_HOME, not the caller's cwd
            CONNECTION,
            "--run-config",
            str(run_config.resolve()),
            "--stream",
        ]
