"""`python -m fedbench.device`: join a fedbench deployment as a physical device.

    python -m fedbench.device issue-credentials out=~/.fedbench name=my-pi
    python -m fedbench.device superlink=192.168.1.10:9092 \\
        root_certificates=ca.pem auth_key=~/.fedbench/my-pi.key profile=auto

The first command makes this device's key pair and prints the public key,
which the operator lists in `runtime.physical_keys` (the SuperLink refuses
every key it was not given). The second runs a Flower SuperNode with
fedbench's ClientApp; the server seats it in one of the fleet's
`physical` slots, where its training is measured by the probe
(ProbeMeter). `profile=auto` announces what the device can read about
itself (cores, clocks, memory); `profile=NAME` announces a device profile
(a name in fedbench/device_profiles/ or a YAML from `python -m fedbench.profile_device`).
The device keeps trying to reach the SuperLink until it answers (or
`max_wait_s` passes); a refused key ends it with exit code 3.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from fedbench.cli.grammar import Grammar, Key, parse_bool, parse_float
from fedbench.errors import FedbenchError
from fedbench.runtime.flower import NOT_ADMITTED

EXIT_REFUSED = 3


JOIN = Grammar(
    prog="python -m fedbench.device",
    summary="Run this device as a fedbench physical device (a Flower SuperNode).",
    keys=(
        Key("superlink", "the SuperLink's HOST:PORT", required=True),
        Key("root_certificates", "CA certificate (PEM) of the SuperLink (or insecure=true)"),
        Key("auth_key", "this device's private key (from issue-credentials)"),
        Key("profile", "auto, a profile name, or a profile YAML", "auto"),
        Key("name", "device name", "the hostname"),
        Key("insecure", "no TLS (a SuperLink run with --insecure)", "false", flag=True),
        Key("max_wait_s", "give up reaching the SuperLink after this many seconds (unset: never)"),
    ),
    examples=(
        "python -m fedbench.device superlink=192.168.1.10:9092 root_certificates=ca.pem "
        "auth_key=~/.fedbench/my-pi.key profile=auto",
    ),
    description="First, once per device: python -m fedbench.device issue-credentials --help",
)
ISSUE = Grammar(
    prog="python -m fedbench.device issue-credentials",
    summary="Create this device's node key pair; register the printed public key with the "
    "server (runtime.physical_keys).",
    keys=(
        Key("out", "folder for NAME.key and NAME.pub", required=True),
        Key("name", "device name", "the hostname"),
        Key("force", "replace a key pair NAME already has in out", "false", flag=True),
    ),
    examples=("python -m fedbench.device issue-credentials out=~/.fedbench name=my-pi",),
)


def _path(raw: str | None) -> Path | None:
    return None if raw is None else Path(raw).expanduser()


def announced_profile(value: str) -> str:
    """What the device says it is: a description for `auto`, else a validated profile name."""
    if value == "auto":
        from fedbench.profiling.describe import describe

        return describe().summary()
    from fedbench.devices.profile import load_profile

    return load_profile(value).name


def issue(argv: Sequence[str]) -> int:
    from fedbench.security import issue_node_key

    args = ISSUE.parse(argv)
    out, name = Path(args["out"]).expanduser(), args.get("name") or socket.gethostname()
    held = [p for p in (out / f"{name}.key", out / f"{name}.pub") if p.exists()]
    if held and not parse_bool("force", args.get("force", "false") or "false"):
        raise FedbenchError(
            f"{held[0]} already exists: a new key pair would lock device {name!r} out until the "
            "server registers its new public key; give force=true to replace it, or another name="
        )
    key = issue_node_key(out, name)
    print(f"private key (keep on this device): {key.private_key}")
    print(f"public key (give to the server, runtime.physical_keys): {key.public_key}")
    print(key.public_key.read_text().strip())
    return 0


def join(argv: Sequence[str]) -> int:
    from fedbench.runtime.flower import free_port, supernode_argv
    from fedbench.security import check_certificates, check_private_key, issue_secret

    args = JOIN.parse(argv)
    insecure = parse_bool("insecure", args.get("insecure", "false") or "false")
    ca, auth_key = _path(args.get("root_certificates")), _path(args.get("auth_key"))
    wait = args.get("max_wait_s")
    max_wait_s = None if wait is None else parse_float("max_wait_s", wait, 0.0)
    name = args.get("name") or socket.gethostname()
    if insecure and ca:
        raise FedbenchError("insecure=true and root_certificates= exclude each other")
    if not insecure and ca is None:
        raise FedbenchError(
            "root_certificates=CA.pem is required (the CA that signed the SuperLink's "
            "certificate: <run>/credentials/ca.pem for a fleet fedbench set up), "
            "or insecure=true"
        )
    if ca is not None:
        check_certificates("root_certificates", ca)
    if auth_key is not None:
        check_private_key(auth_key)
    profile = announced_profile(args.get("profile") or "auto")
    config = {"device-name": name, "profile": profile}
    superlink = args["superlink"]
    # The node's local Runtime API serves only a SuperExec holding this secret: other
    # accounts on the device cannot take its ClientApp's task (fedbench.runtime.flower).
    private = Path(tempfile.mkdtemp(prefix="fedbench-device-"))
    try:
        secret = issue_secret(private / "superexec.secret")
        port = free_port()
        argv_node = supernode_argv(
            superlink, config, port, None if insecure else ca, auth_key, max_wait_s, secret
        )
        print(f"[fedbench] device {name} ({profile}) joining {superlink}", flush=True)
        return _supervise(argv_node, superlink, max_wait_s, (port, secret))
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _supervise(
    argv_node: list[str],
    superlink: str,
    max_wait_s: float | None,
    runtime: tuple[int, Path] | None = None,
) -> int:
    """Run the SuperNode; start it again while the SuperLink does not admit it.

    A device started before the server registered its key is refused like
    an unknown one, so a refusal is retried (with back-off) until
    `max_wait_s`; every refusal is also in the server's run folder.
    """
    from fedbench.runtime.flower import FLOWER_ENV, node_superexec_argv
    from fedbench.runtime.processes import ProcessSet, terminate_as_interrupt

    start = time.monotonic()
    pause = 2.0
    while True:
        procs = ProcessSet()
        refused = threading.Event()
        pump: threading.Thread | None = None
        try:
            with terminate_as_interrupt():
                env = {**os.environ, **FLOWER_ENV}
                node = procs.start("supernode", argv_node, env, None, stdout=subprocess.PIPE)
                if runtime is not None:  # the node's ClientApps: output to this console
                    procs.start("superexec", node_superexec_argv(*runtime, node.pid), env, None)
                pump = threading.Thread(target=_echo, args=(node.popen.stdout, refused))
                pump.start()
                code = node.popen.wait()
        except KeyboardInterrupt:
            return 0
        finally:
            # The SuperNode's helpers hold its output pipe open: stop them before
            # waiting for the echo thread to see the end of it.
            procs.stop()
            if pump is not None:
                pump.join(timeout=10)
        if not refused.is_set():
            return code
        waited = time.monotonic() - start
        print(
            f"[fedbench] the SuperLink at {superlink} did not admit this device "
            f"(after {waited:.0f}s): is its public key registered (runtime.physical_keys), "
            "and is the CA the right one?",
            file=sys.stderr,
            flush=True,
        )
        if max_wait_s is not None and waited + pause > max_wait_s:
            return EXIT_REFUSED
        try:
            time.sleep(pause)
        except KeyboardInterrupt:
            return 0
        pause = min(2 * pause, 30.0)


def _echo(stream: IO[bytes] | None, refused: threading.Event) -> None:
    """Pass the SuperNode's output through; Flower exits with status 1 on every
    error, so its output is what tells a refusal apart."""
    if stream is None:
        return
    for raw in stream:
        line = raw.decode(errors="replace")
        sys.stdout.write(line)
        sys.stdout.flush()
        if NOT_ADMITTED in line:
            refused.set()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "issue-credentials":
        return ISSUE.main(issue, args[1:])
    return JOIN.main(join, args)


if __name__ == "__main__":
    sys.exit(main())
