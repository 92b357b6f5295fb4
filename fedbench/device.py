"""`python -m fedbench.device`: join a fedbench deployment as a physical device.

    python -m fedbench.device issue-credentials --out ~/.fedbench --name my-pi
    python -m fedbench.device --superlink 192.168.1.10:9092 \\
        --root-certificates ca.pem --auth-key ~/.fedbench/my-pi.key --profile auto

The first command makes this device's key pair and prints the public key,
which the operator lists in `runtime.physical_keys` (the SuperLink refuses
every key it was not given). The second runs a Flower SuperNode with
fedbench's ClientApp; the server seats it in one of the fleet's
`physical` slots, where its training is measured by the probe
(ProbeMeter). `--profile auto` announces what the device can read about
itself (cores, clocks, memory); `--profile NAME` announces a device profile
(a name in device_profiles/ or a YAML from `python -m fedbench.profile_device`).
The device keeps trying to reach the SuperLink until it answers (or
`--max-wait-s` passes); a refused key ends it with exit code 3.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from fedbench.errors import FedbenchError
from fedbench.runtime.flower import NOT_ADMITTED

EXIT_REFUSED = 3


def _join_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fedbench.device",
        description="Run this device as a fedbench physical device (a Flower SuperNode). "
        "See also: python -m fedbench.device issue-credentials --help",
    )
    p.add_argument("--superlink", required=True, help="the SuperLink's HOST:PORT")
    p.add_argument("--root-certificates", type=Path, help="CA certificate (PEM) of the SuperLink")
    p.add_argument("--auth-key", type=Path, help="this device's private key (issue-credentials)")
    p.add_argument("--profile", default="auto", help="auto, a profile name, or a profile YAML")
    p.add_argument("--name", default=socket.gethostname(), help="device name (default: hostname)")
    p.add_argument("--insecure", action="store_true", help="no TLS (a SuperLink run --insecure)")
    p.add_argument("--max-wait-s", type=float, help="give up reaching the SuperLink after this")
    return p


def _issue_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fedbench.device issue-credentials",
        description="Create this device's node key pair; register the printed public key "
        "with the server (runtime.physical_keys).",
    )
    p.add_argument("--out", type=Path, required=True, help="folder for NAME.key and NAME.pub")
    p.add_argument("--name", default=socket.gethostname(), help="device name (default: hostname)")
    return p


def announced_profile(value: str) -> str:
    """What the device says it is: a description for `auto`, else a validated profile name."""
    if value == "auto":
        from fedbench.profiling.describe import describe

        return describe().summary()
    from fedbench.devices.profile import load_profile

    return load_profile(value).name


def issue(argv: Sequence[str]) -> int:
    from fedbench.security import issue_node_key

    args = _issue_parser().parse_args(argv)
    key = issue_node_key(args.out.expanduser(), args.name)
    print(f"private key (keep on this device): {key.private_key}")
    print(f"public key (give to the server, runtime.physical_keys): {key.public_key}")
    print(key.public_key.read_text().strip())
    return 0


def join(argv: Sequence[str]) -> int:
    from fedbench.runtime.flower import free_port, supernode_argv
    from fedbench.security import check_private_key

    args = _join_parser().parse_args(argv)
    if args.insecure and args.root_certificates:
        raise FedbenchError("--insecure and --root-certificates exclude each other")
    if not args.insecure and args.root_certificates is None:
        raise FedbenchError(
            "--root-certificates CA.pem is required (the CA that signed the SuperLink's "
            "certificate: <run>/credentials/ca.pem for a fleet fedbench set up), or --insecure"
        )
    if args.root_certificates is not None and not args.root_certificates.is_file():
        raise FedbenchError(f"--root-certificates {args.root_certificates}: no such file")
    if args.auth_key is not None:
        check_private_key(args.auth_key)
    profile = announced_profile(args.profile)
    config = {"device-name": args.name, "profile": profile}
    argv_node = supernode_argv(
        args.superlink,
        config,
        free_port(),
        None if args.insecure else args.root_certificates,
        args.auth_key,
        args.max_wait_s,
    )
    print(f"[fedbench] device {args.name} ({profile}) joining {args.superlink}", flush=True)
    return _supervise(argv_node, args.superlink, args.max_wait_s)


def _supervise(argv_node: list[str], superlink: str, max_wait_s: float | None) -> int:
    """Run the SuperNode; start it again while the SuperLink does not admit it.

    A device started before the server registered its key is refused like
    an unknown one, so a refusal is retried (with back-off) until
    `max_wait_s`; every refusal is also in the server's run folder.
    """
    from fedbench.runtime.flower import FLOWER_ENV
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
    try:
        if args and args[0] == "issue-credentials":
            return issue(args[1:])
        return join(args)
    except FedbenchError as exc:
        print(f"fedbench.device: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
