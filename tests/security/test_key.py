"""The per-user secret: made 0600 on first use, refused when others can read it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.trust import key


def test_the_secret_is_made_private_once_and_keys_the_fingerprints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config" / "fedbench" / "secret"
    monkeypatch.setenv(key.SECRET_ENV, str(path))
    first = key.user_secret()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert key.user_secret() == first and len(first) == key.SECRET_BYTES
    mac = key.sign("checkpoint", b"rows")
    assert key.verify("checkpoint", b"rows", mac)
    assert not key.verify("checkpoint", b"rows!", mac)
    assert not key.verify("processes", b"rows", mac)  # a label is a separate use
    other = key.sign("checkpoint", b"rows", b"x" * 32)
    assert other != mac and key.key_id(b"x" * 32) != key.key_id()


def test_a_secret_others_can_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret"
    path.write_bytes(os.urandom(32))
    path.chmod(0o644)
    monkeypatch.setenv(key.SECRET_ENV, str(path))
    with pytest.raises(FedbenchError, match=r"readable by nobody else \(mode 0644\); chmod 600"):
        key.user_secret()
