"""runtime=deployment without servers: config checks, credentials, Flower arguments, seating."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
import tomli
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from flwr.cli.supernode.register import try_load_public_key
from flwr.common.config import parse_config_args

from fedbench.client.app import app as client_app
from fedbench.errors import FedbenchError
from fedbench.experiment.codec import EXPERIMENT_KEY
from fedbench.experiment.fleet import expand_fleet
from fedbench.experiment.schema import Experiment
from fedbench.runtime.base import Apps
from fedbench.runtime.bundle import write_bundle
from fedbench.runtime.deployment import DeploymentRuntime, _write_registered, registered_nodes
from fedbench.runtime.flower import node_config_arg, write_run_config
from fedbench.security import check_private_key, issue_node_key, issue_tls, read_public_key
from fedbench.server.app import app as server_app
from tests.bad_inputs import _typed

APPS = Apps(server_app, client_app)  # a deployment's nodes load them from its bundle


def test_bad_runtime_settings_are_refused_with_the_key() -> None:
    with pytest.raises(FedbenchError, match="runtime.tls_server_cert, runtime.tls_server_key"):
        DeploymentRuntime(tls_ca_cert="ca.pem")
    with pytest.raises(FedbenchError, match="memory_limit='lots'"):
        DeploymentRuntime(memory_limit="lots")
    with pytest.raises(FedbenchError, match="runtime.port=70000"):
        DeploymentRuntime(port=70000)
    assert DeploymentRuntime(physical_keys=["a.pub"]).physical_keys == ("a.pub",)


def _experiment(devices: list[dict[str, object]]) -> Experiment:
    fleet = ",".join(f"{{profile:{d['profile']},count:{d['count']}}}" for d in devices)
    return _typed([f"fleet.devices=[{fleet}]", "runtime=deployment"])  # type: ignore[return-value]


def test_missing_physical_keys_fail_before_any_process(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    runtime = DeploymentRuntime()
    exp = _experiment([{"profile": "rpi4", "count": 1}, {"profile": "physical", "count": 2}])
    with pytest.raises(FedbenchError, match="2 physical device.*lists 0 public key"):
        runtime.run(exp, tmp_path, APPS)
    key = issue_node_key(tmp_path, "pi")
    twice = DeploymentRuntime(physical_keys=[str(key.public_key)] * 2)
    with pytest.raises(FedbenchError, match="lists a key twice"):
        twice.run(exp, tmp_path, APPS)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    bad = tmp_path / "rsa.pub"
    bad.write_bytes(
        rsa_key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
    )
    wrong = DeploymentRuntime(physical_keys=[str(bad), str(key.public_key)])
    with pytest.raises(FedbenchError, match="expected an EC key on a NIST curve"):
        wrong.run(exp, tmp_path, APPS)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_test_ca_signs_a_server_certificate_for_loopback(tmp_path: Path) -> None:
    files = issue_tls(tmp_path, ["127.0.0.1", "localhost", "pi-server.lan"])
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    server.verify_directly_issued_by(ca)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "pi-server.lan"]
    assert files.server_key.stat().st_mode & 0o777 == 0o600


def test_node_keys_are_what_flower_accepts(tmp_path: Path) -> None:
    key = issue_node_key(tmp_path, "my-pi")
    assert key.private_key.stat().st_mode & 0o777 == 0o600
    check_private_key(key.private_key)
    assert read_public_key(key.public_key).startswith("ecdsa-sha2-nistp384 ")
    assert try_load_public_key(key.public_key)  # what `flwr supernode register` does
    private = serialization.load_ssh_private_key(key.private_key.read_bytes(), None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)  # flower-supernode's check
    with pytest.raises(FedbenchError, match="device name"):
        issue_node_key(tmp_path, "../escape")


def test_node_config_survives_flowers_parser() -> None:
    values = {"partition-id": 3, "device-name": "pi 4 b", "profile": "auto: 4x a72 @ 1.50 GHz"}
    assert parse_config_args([node_config_arg(values)]) == values
    with pytest.raises(FedbenchError):
        node_config_arg({"bad key": 1})
    with pytest.raises(FedbenchError, match="no quotes"):
        node_config_arg({"device-name": 'pi "4"'})


def test_the_bundle_and_run_config_carry_the_experiment(tmp_path: Path) -> None:
    from flwr.cli.build import build_fab_from_disk
    from flwr.cli.config_utils import load_and_validate

    app = write_bundle(tmp_path / "app", None)
    config, _ = load_and_validate(app / "pyproject.toml")
    components = config["tool"]["flwr"]["app"]["components"]
    assert components == {
        "serverapp": "fedbench.server.app:app",
        "clientapp": "fedbench.client.app:app",
    }
    assert build_fab_from_disk(app)  # Flower packs it into a FAB
    text = json.dumps({"seed": 1, "name": 'quotes " and \\ back'})
    path = write_run_config(tmp_path / "run.toml", text)
    assert tomli.loads(path.read_text())[EXPERIMENT_KEY] == text


def test_a_device_is_seated_where_its_key_was_registered(tmp_path: Path) -> None:
    """Seats follow registration: what a node says about itself never moves it."""
    from fedbench.runtime.nodes import plan_nodes

    devices = expand_fleet(
        {"devices": [{"profile": "rpi4", "count": 1}, {"profile": "physical", "count": 2}]}
    )
    nodes = plan_nodes(devices, tmp_path, "none", None)
    keys = [issue_node_key(tmp_path / "phys", n).public_key for n in ("pi-a", "pi-b")]
    ids = {nodes[0].key.public_key: 10, keys[0]: 11, keys[1]: 12}
    _write_registered(tmp_path, nodes, ids, list(zip(devices[1:], keys, strict=True)))
    assert registered_nodes(tmp_path) == {"rpi4-000": 10, "physical-000": 11, "physical-001": 12}


def test_flwr_json_documents_and_node_activations_are_read_from_output(tmp_path: Path) -> None:
    from fedbench.runtime.deployment import _activated, _refusals
    from fedbench.runtime.flower import _json_documents

    text = 'Using SuperLink: x\n{\n  "success": true,\n  "node-id": 7\n}\n'
    text += 'noise {oops\n{"a": {"b": 1}}\n'
    assert _json_documents(text) == [{"success": True, "node-id": 7}, {"a": {"b": 1}}]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "superlink.log").write_text(
        "INFO :      [Fleet.ActivateNode] Activated node_id=11\n"
        "INFO :      [Fleet.ActivateNode] Activated node_id=12\n"
        "ERROR :     [/v1/fleet/activate-node][ApiError:2004] Attempted to register SuperNode "
        "with public key: b'...', exception: No SuperNode found with the given public key.\n"
        "INFO :      [Fleet.DeactivateNode] Deactivated node_id=11\n"
    )
    assert _activated(tmp_path) == {12}
    assert len(_refusals(tmp_path)) == 1


def _tls_cases(tmp_path: Path) -> dict[str, tuple[list[str], tuple[str, ...]]]:
    """Bad `runtime.tls_*` sets: overrides and what the one line must name."""
    good = issue_tls(tmp_path / "good", ["127.0.0.1"])
    other = issue_tls(tmp_path / "other", ["127.0.0.1"])
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"\x00\x01 this is not PEM \xff\n")

    def given(ca: Path, cert: Path, key: Path) -> list[str]:
        return [
            f"runtime.tls_ca_cert={ca}",
            f"runtime.tls_server_cert={cert}",
            f"runtime.tls_server_key={key}",
        ]

    return {
        "garbage cert": (
            given(good.ca_cert, garbage, good.server_key),
            (f"runtime.tls_server_cert={garbage}", "not a PEM certificate"),
        ),
        "swapped": (
            given(good.ca_cert, good.server_key, good.server_cert),
            (f"runtime.tls_server_cert={good.server_key}", "holds a private key"),
        ),
        "another key": (
            given(good.ca_cert, good.server_cert, other.server_key),
            (f"runtime.tls_server_key={other.server_key}", "not the key of"),
        ),
        "missing ca": (
            given(tmp_path / "nope.pem", good.server_cert, good.server_key),
            (f"runtime.tls_ca_cert={tmp_path / 'nope.pem'}", "no such file"),
        ),
    }


def test_a_bad_tls_file_is_one_line_naming_key_and_file_and_no_run_folder(
    tmp_path: Path,
) -> None:
    from tests.cli_runner import Command, run_commands

    cases = _tls_cases(tmp_path)
    commands = []
    for i, (overrides, _) in enumerate(cases.values()):
        cwd = tmp_path / f"case{i}"
        cwd.mkdir()
        args = ("runtime=deployment", "experiment=smoke", *overrides, "dry_run=true")
        commands.append(Command("fedbench", args, str(cwd)))
    results = run_commands(commands)
    for i, ((name, (_, expect)), result) in enumerate(zip(cases.items(), results, strict=True)):
        lines = result.stderr.strip().splitlines()
        assert result.code == 2, (name, result.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("fedbench: error: "), (name, lines)
        assert all(e in lines[0] for e in expect), (name, lines[0])
        assert list((tmp_path / f"case{i}").iterdir()) == [], name  # no run folder
