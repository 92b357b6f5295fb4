"""`python -m fedbench.device`: credentials, argument checks, refusal handling."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedbench.device import EXIT_REFUSED, _supervise, announced_profile, main
from fedbench.errors import FedbenchError
from fedbench.security import issue_tls, read_public_key


def test_issue_credentials_writes_a_key_pair_and_prints_the_public_key(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fedbench.device", "issue-credentials"]
        + ["--out", str(tmp_path), "--name", "my-pi"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    public = read_public_key(tmp_path / "my-pi.pub")
    assert public in out.stdout
    assert (tmp_path / "my-pi.key").stat().st_mode & 0o777 == 0o600


def test_joining_needs_the_servers_ca_or_insecure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--superlink", "127.0.0.1:1"]) == 2
    assert "root_certificates=CA.pem is required" in capsys.readouterr().err
    assert main(["--superlink", "127.0.0.1:1", "--root-certificates", "nope.pem"]) == 2
    assert "root_certificates=nope.pem: no such file" in capsys.readouterr().err
    ca = issue_tls(tmp_path, ["127.0.0.1"]).ca_cert
    args = ["--superlink", "127.0.0.1:1", "--root-certificates", str(ca)]
    assert main([*args, "--insecure"]) == 2
    assert main([*args, "--auth-key", str(ca)]) == 2  # a certificate is not a node key
    assert "not an OpenSSH private key" in capsys.readouterr().err
    assert main([*args, "--profile", "rpi5x"]) == 2
    assert "unknown device profile 'rpi5x'" in capsys.readouterr().err


def test_announced_profile_is_a_description_or_a_known_profile() -> None:
    auto = announced_profile("auto")
    assert auto.startswith("auto: ") and " GB" in auto
    assert announced_profile("rpi4") == "rpi4"
    with pytest.raises(FedbenchError):
        announced_profile("no-such-device")


def test_a_refused_node_is_retried_then_given_up(capsys: pytest.CaptureFixture[str]) -> None:
    # Stands in for flower-supernode refused by the SuperLink: it prints
    # Flower's exit message and ends with status 1, as Flower does.
    refused = [sys.executable, "-c", "print('Exit Code: 305'); raise SystemExit(1)"]
    start = time.monotonic()
    assert _supervise(refused, "127.0.0.1:1", max_wait_s=3.0) == EXIT_REFUSED
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert err.count("did not admit this device") >= 1
    other = [sys.executable, "-c", "raise SystemExit(7)"]
    assert _supervise(other, "127.0.0.1:1", max_wait_s=3.0) == 7  # not a refusal: no retry
