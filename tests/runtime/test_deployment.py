"""runtime=deployment on loopback: two emulated SuperNodes, two physical devices, attackers.

fedbench starts the SuperLink (TLS + node authentication, on 127.0.0.1
only), the Fleet-only proxy on the public port and the two emulated
devices' SuperNodes; when it asks for the physical devices the test starts
one with `python -m fedbench.device` (this host measured by the probe), a
second whose registered key was issued for another name and which claims
the first one's name, and an intruder whose key was never registered. From
outside, it also tries what the Control API would allow: `flwr run`,
`flwr supernode register/unregister`, `flwr stop`, `GET /openapi.json`.
The honest devices train; the Control calls, the intruder and the impostor
are refused and the refusals are in the run folder; afterwards no process
of the run is left.
"""

from __future__ import annotations

import contextlib
import csv
import http.client
import os
import queue
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from fedbench.runtime.flower import CONNECTION, FlowerCli, _json_documents, free_port, tool
from fedbench.security import TlsFiles, issue_node_key, issue_tls

pytestmark = pytest.mark.slow

FLOWER_NAMES = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr-")


def _lines(stream: object, out: queue.Queue[str]) -> None:
    for raw in stream:  # type: ignore[attr-defined]
        out.put(raw.decode(errors="replace") if isinstance(raw, bytes) else raw)


def _device(superlink: str, ca: Path, key: Path, name: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fedbench.device", f"superlink={superlink}"]
        + [f"root_certificates={ca}", f"auth_key={key}", f"name={name}", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )


def serve(
    tls: TlsFiles | None, port: int | None, keys: list[Path], run_dir: Path, *overrides: str
) -> tuple[subprocess.Popen[bytes], queue.Queue[str]]:
    """`python -m fedbench runtime=deployment` on loopback with these physical keys.

    Without `tls` the run issues its own test CA; without `port` it takes a free one.
    """
    given = (
        [
            f"runtime.tls_ca_cert={tls.ca_cert}",
            f"runtime.tls_server_cert={tls.server_cert}",
            f"runtime.tls_server_key={tls.server_key}",
        ]
        if tls
        else []
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedbench",
            "runtime=deployment",
            "runtime.wait_for_physical_s=120",
            "runtime.wait_for_nodes_s=120",
            *overrides,
            *([f"runtime.port={port}"] if port else []),
            *given,
            f"runtime.physical_keys=[{','.join(str(k) for k in keys)}]",
            f"hydra.run.dir={run_dir}",
        ],
        stdout=subprocess.PIPE,  # fedbench's progress lines ...
        stderr=subprocess.STDOUT,  # ... and its warnings and errors, in the order printed
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
        preexec_fn=_as_from_a_terminal,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(server.stdout, lines), daemon=True).start()
    return server, lines


def _as_from_a_terminal() -> None:
    """Ctrl-C's handling as a command typed at a shell gets it.

    An ignored or blocked SIGINT is inherited by every child: a test runner
    started in the background of a script (or a library call in it) can
    leave one, and the run would then never see the test's Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _signal_masks(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return ""
    return " ".join(
        line.replace("\t", "") for line in status if line.startswith(("SigBlk", "SigIgn"))
    )


def follow(
    server: subprocess.Popen[bytes],
    lines: queue.Queue[str],
    on_line: Callable[[str], None],
    timeout_s: float,
) -> list[str]:
    """The server's console until it exits, calling `on_line` on each line; its log."""
    start = time.monotonic()
    log: list[str] = []
    while server.poll() is None or not lines.empty():
        assert time.monotonic() < start + timeout_s, "run took too long:\n" + "".join(log[-30:])
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        log.append(f"{time.monotonic() - start:6.1f}s {line}")
        on_line(line)
    assert server.returncode == 0, "".join(log[-40:])
    return log


def _flower_leftovers(pids: list[int], since: float) -> list[str]:
    """Processes of the run still alive: a listed PID that is still a Flower process."""
    left = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.create_time() > since - 1 and p.status() != psutil.STATUS_ZOMBIE:
                cmd = " ".join(p.cmdline())
                if any(n in cmd for n in FLOWER_NAMES) or "fedbench" in cmd:
                    left.append(f"{pid}: {cmd[:120]}")
        except psutil.Error:
            continue
    return left


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _control_from_outside(public: str, ca: Path, key: Path, app: Path, home: Path) -> list[str]:
    """What the Control API allows, tried against the public port; each call's error."""
    cli = FlowerCli(home, public, ca)
    commands = [
        ["supernode", "register", str(key), CONNECTION],
        ["supernode", "unregister", "1", CONNECTION],
        ["stop", "1", CONNECTION],
        ["supernode", "list", CONNECTION],
        ["ls", CONNECTION],
    ]
    docs = cli.answers(commands)
    run = subprocess.run(
        [*tool("flwr"), "run", str(app), CONNECTION, "--format", "json"],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=home,
        timeout=120,
    )
    docs += _json_documents(run.stdout)
    ctx = ssl.create_default_context(cafile=str(ca))
    host, port = public.split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
    conn.request("GET", "/openapi.json")
    status = conn.getresponse().status
    assert status == 403
    assert len(docs) == len(commands) + 1 and not any(d.get("success") for d in docs), docs
    return [str(d.get("error-message", "")) for d in docs]


def test_mixed_fleet_with_physical_devices_and_attackers(tmp_path: Path) -> None:
    since = time.time()
    tls = issue_tls(tmp_path / "tls", ["127.0.0.1", "localhost"])
    probe = issue_node_key(tmp_path / "keys", "probe-host")
    other = issue_node_key(tmp_path / "keys", "other-board")
    intruder = issue_node_key(tmp_path / "keys", "intruder")
    port = free_port()
    run_dir = tmp_path / "run"
    server, lines = serve(
        tls,
        port,
        [probe.public_key, other.public_key],
        run_dir,
        "experiment=smoke",
        "fleet.devices=[{profile:rpi4,count:1},{profile:pixel2,count:1},{profile:physical,count:2}]",
        "strategy.clients_per_round=4",
        "scenario.days=1",
        "scenario.pretrain.epochs=0",
    )
    superlink = f"127.0.0.1:{port}"
    device = impostor = intruder_proc = None
    errors: list[str] = []
    app = tmp_path / "app"
    shutil.copytree(Path(__file__).parents[1] / "apps" / "quickstart", app)

    def join(line: str) -> None:
        nonlocal device, impostor, intruder_proc
        if "waiting for 2 physical device" in line and device is None:
            # What a user does on the device: one command (README).
            device = _device(superlink, tls.ca_cert, probe.private_key, "probe-host")
            # A registered key, claiming the seat of another device.
            impostor = _device(superlink, tls.ca_cert, other.private_key, "probe-host")
            intruder_proc = _device(
                superlink, tls.ca_cert, intruder.private_key, "intruder", "max_wait_s=8"
            )
            errors.extend(
                _control_from_outside(
                    superlink, tls.ca_cert, intruder.public_key, app, tmp_path / "outside"
                )
            )

    try:
        log = follow(server, lines, join, timeout_s=360)
        assert device is not None and impostor is not None and intruder_proc is not None

        out, _ = intruder_proc.communicate(timeout=60)
        assert intruder_proc.returncode == 3, out[-2000:]
        assert "did not admit this device" in out

        for path in (
            "register-node",
            "unregister-node",
            "stop-run",
            "list-nodes",
            "list-runs",
            "start-run",
        ):
            assert any(
                f"'403 Forbidden' for url 'https://{superlink}/v1/control/{path}'" in e
                for e in errors
            ), (path, errors)

        rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
        assert Counter(r["kind"] for r in rows) == {"emulated": 2, "physical": 2}, rows
        by_device = {r["device"]: r for r in rows}
        assert all(by_device[d]["status"] == "ok" for d in ("rpi4-000", "pixel2-000"))
        phys = by_device["physical-000"]
        assert phys["status"] == "ok" and float(phys["latency_s"]) > 0
        assert float(phys["mem_budget_mb"]) > 0  # measured by the probe: MemAvailable
        fake = by_device["physical-001"]
        assert fake["status"] == "failed"
        assert "announces itself as 'probe-host'" in fake["reason"]
        assert "registered for 'other-board'" in fake["reason"]
        assert any("physical device probe-host is physical-000" in line for line in log)
        assert any("physical-001: refused: node announces" in line for line in log)

        refused = (run_dir / "refused.log").read_text()
        assert "ApiError:2004" in refused  # the intruder's node
        for path in ("/v1/control/start-run", "/v1/control/register-node", "/openapi.json"):
            assert path in refused

        limits = {r["device"]: r for r in csv.DictReader((run_dir / "logs/limits.csv").open())}
        assert set(limits) == {"rpi4-000", "pixel2-000"}
        host_cpus = min(len(os.sched_getaffinity(0)), 4)
        assert len(limits["rpi4-000"]["cpus"].split(";")) == host_cpus
        if limits["rpi4-000"]["cgroup"] == "":
            assert int(limits["rpi4-000"]["rlimit_as_mb"]) > 3400  # budget + idle client

        pids = [int(r["pid"]) for r in csv.DictReader((run_dir / "logs/processes.csv").open())]
        assert len(pids) >= 6  # superlink, 2 supernodes, their helpers, flwr run, apps
        assert _flower_leftovers(pids, since) == []

        # The device outlives the run (it would join the next one); stopped
        # with SIGTERM it takes its SuperNode and the helpers with it.
        tree = _tree(device.pid)
        assert len(tree) >= 2
        device.terminate()
        device.wait(timeout=60)
        assert _running(tree, timeout=15) == []
        impostor.terminate()
        impostor.wait(timeout=60)
    finally:
        for proc in (server, device, impostor, intruder_proc):
            _stop(proc)


def _running(procs: list[psutil.Process], timeout: float) -> list[int]:
    """PIDs still running after up to `timeout` s (a zombie has ended; init reaps it)."""
    end = time.monotonic() + timeout
    while True:
        left = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p.pid)
            except psutil.Error:
                continue
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.2)


def test_ctrl_c_while_waiting_for_devices_stops_everything(tmp_path: Path) -> None:
    since = time.time()
    key = issue_node_key(tmp_path / "keys", "never-comes")
    run_dir = tmp_path / "run"
    server, lines = serve(
        None,
        None,
        [key.public_key],
        run_dir,
        "experiment=smoke",
        "fleet.devices=[{profile:host,count:1},{profile:physical,count:1}]",
        "strategy.clients_per_round=2",
        "runtime.wait_for_physical_s=300",
    )
    log: list[str] = []
    try:
        deadline = time.monotonic() + 120
        # The hint for physical devices comes first, then the local nodes start.
        while not any("deployment: host-000:" in line for line in log):
            assert server.poll() is None and time.monotonic() < deadline, "".join(log)
            with contextlib.suppress(queue.Empty):
                log.append(lines.get(timeout=0.5))
        assert any("waiting for 1 physical device" in line for line in log)
        time.sleep(1.0)
        tree = _tree(server.pid)
        assert len(tree) >= 4  # fedbench, SuperLink (+ its helper), the host device's SuperNode
        log.append(
            f"(before Ctrl-C: fedbench {_signal_masks(server.pid)}; "
            f"pytest {_signal_masks(os.getpid())})\n"
        )
        server.send_signal(signal.SIGINT)  # what Ctrl-C sends
        # Terminate, 5 s grace, kill, the watchdog's sweep: seconds on a quiet host
        # (3.8 s with three busy loops beside it); a CI host shared with a training
        # run once took over 60 s, so the bound is generous and the log says why.
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=150)
        while True:
            try:
                log.append(lines.get(timeout=0.5))
            except queue.Empty:
                break
        assert server.returncode == 130, "".join(log)  # stopped cleanly, no traceback
        assert any("interrupted; stopped the" in line for line in log), "".join(log)
        assert _running(tree, timeout=15) == []
        pids = [int(r["pid"]) for r in csv.DictReader((run_dir / "logs/processes.csv").open())]
        assert _flower_leftovers(pids, since) == []
        assert (run_dir / "credentials" / "ca.pem").is_file()  # a test CA issued for the run
    finally:
        _stop(server)


def _stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None) -> None:
    """After a failed assertion: let the process clean up (SIGTERM), else kill its tree."""
    if proc is None or proc.poll() is not None:
        return
    tree = _tree(proc.pid)
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        for p in reversed(tree):
            with contextlib.suppress(psutil.Error):
                p.kill()
        proc.wait(timeout=10)
