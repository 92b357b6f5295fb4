"""A user's Flower app in a real deployment on loopback, with a device that has no fedbench.

fedbench submits the app (tests/apps/quickstart) as a bundle with its code,
under its own ServerApp; one emulated SuperNode runs it under the device mod,
one physical device joins with `python -m fedbench.device`, and one stock
Flower SuperNode joins the way Flower's docs say (`flower-supernode
--node-config "partition-id=0 num-partitions=2"`) on a Python where fedbench
cannot be imported. Every device trains; the stock one is recorded as
unprofiled (its round trip measured by the server, energy and memory
unknown) and counted in the aggregate.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from fedbench.runtime import entry
from fedbench.runtime.flower import free_port, supernode_argv
from fedbench.security import issue_node_key, issue_tls
from tests.runtime.test_deployment import _device, _stop, follow, serve

pytestmark = pytest.mark.slow

APP = Path(__file__).parents[1] / "apps" / "quickstart"

# A Python on which `import fedbench` fails, as on a device that never installed it.
_NO_FEDBENCH = """
import sys


class _NoFedbench:
    def find_spec(self, name, path=None, target=None):
        if name == "fedbench" or name.startswith("fedbench."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoFedbench())
"""


def _as_flowers_script(argv: list[str]) -> list[str]:
    """fedbench's SuperNode command line as Flower's own `flower-supernode` script runs it.

    fedbench starts Flower's scripts through its launcher (fedbench.runtime.entry), which
    a device without fedbench cannot import; the stock device runs what the installed
    script runs (its entry point), with this interpreter.
    """
    launcher = entry.argv("flower-supernode")
    assert argv[: len(launcher)] == launcher, argv
    (script,) = entry_points(group="console_scripts", name="flower-supernode")
    code = (
        f"import sys; from {script.module} import {script.attr}; "
        f"sys.argv[0] = 'flower-supernode'; sys.exit({script.attr}())"
    )
    return [sys.executable, "-c", code, *argv[len(launcher) :]]


def _stock_device(superlink: str, ca: Path, key: Path, blocker: Path) -> subprocess.Popen[str]:
    ours = supernode_argv(superlink, {"partition-id": 0, "num-partitions": 2}, free_port(), ca, key)
    argv = _as_flowers_script(ours)
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "PYTHONPATH": str(blocker)}
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def test_a_flower_app_on_a_mixed_deployment_with_a_stock_device(tmp_path: Path) -> None:
    blocker = tmp_path / "no_fedbench"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(_NO_FEDBENCH)
    check = subprocess.run(
        [sys.executable, "-c", "import fedbench"],
        env={**os.environ, "PYTHONPATH": str(blocker)},
        capture_output=True,
        text=True,
    )
    assert "No module named 'fedbench'" in check.stderr  # the stock device really lacks it

    tls = issue_tls(tmp_path / "tls", ["127.0.0.1", "localhost"])
    probe = issue_node_key(tmp_path / "keys", "probe-host")
    stock = issue_node_key(tmp_path / "keys", "stock-pi")
    port = free_port()
    run_dir = tmp_path / "run"
    server, lines = serve(
        tls,
        port,
        [probe.public_key, stock.public_key],
        run_dir,
        f"app={APP}",
        "fleet.devices=[{profile:rpi4,count:1},{profile:physical,count:2}]",
        "strategy.clients_per_round=3",
        "scenario=rounds",
        "scenario.rounds=1",
    )
    superlink = f"127.0.0.1:{port}"
    devices: list[subprocess.Popen[str]] = []

    def join(line: str) -> None:
        if "waiting for 2 physical device" in line and not devices:
            devices.append(_device(superlink, tls.ca_cert, probe.private_key, "probe-host"))
            devices.append(_stock_device(superlink, tls.ca_cert, stock.private_key, blocker))

    try:
        follow(server, lines, join, timeout_s=300)
        rows = {r["device"]: r for r in csv.DictReader((run_dir / "rounds.csv").open())}
        assert {d: r["status"] for d, r in rows.items()} == {
            "rpi4-000": "ok",
            "physical-000": "ok",
            "physical-001": "ok",
        }
        assert rows["rpi4-000"]["kind"] == "emulated" and float(rows["rpi4-000"]["energy_j"]) > 0
        assert rows["physical-000"]["kind"] == "physical"
        assert float(rows["physical-000"]["latency_s"]) > 0
        stock_row = rows["physical-001"]
        assert stock_row["kind"] == "unprofiled"
        assert stock_row["energy_j"] == "" and stock_row["peak_mem_mb"] == ""
        assert float(stock_row["round_trip_s"]) > 0 and int(stock_row["num_examples"]) > 0
        server_rounds = list(csv.DictReader((run_dir / "server_rounds.csv").open()))
        assert server_rounds[0]["aggregated"] == "3"  # the stock device's update counts
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "completed"
        assert summary["totals"]["unprofiled_reports"] == 1
        assert (run_dir / "flower" / "app" / "quickstart_app" / "client_app.py").is_file()
        assert (run_dir / "flower" / "app" / "fedbench_seat.py").is_file()
    finally:
        for proc in (server, *devices):
            _stop(proc)
