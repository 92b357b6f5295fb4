"""The per-user secret that keys what fedbench vouches for in a run folder.

A plain hash in a run folder detects accidents only: whoever edits the file
can recompute it. So the fingerprints fedbench writes (the checkpoint, the
process record) are HMAC-SHA256 under a secret kept outside every run folder:
`~/.config/fedbench/secret` (`$XDG_CONFIG_HOME/fedbench/secret`), 32 random
bytes created on first use, mode 0600 in a 0700 folder. `FEDBENCH_SECRET_FILE`
names another file (tests point it at a temporary one).

Each keyed record also carries the key's id (an HMAC of a fixed label, not the
secret): a record keyed by another account's secret can then be told apart
from an edited one, and refused with the right reason.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from fedbench.errors import FedbenchError

SECRET_ENV = "FEDBENCH_SECRET_FILE"
SECRET_BYTES = 32
_ID_LABEL = b"fedbench key id"


def secret_path() -> Path:
    named = os.environ.get(SECRET_ENV)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(config) / "fedbench" / "secret"


def user_secret() -> bytes:
    """This account's secret: read it, or create it (0600) the first time."""
    path = secret_path()
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return _read(path)
    except OSError as exc:
        raise FedbenchError(
            f"{path}: cannot create fedbench's per-user secret ({exc.strerror or exc}); "
            f"make its folder writable or point {SECRET_ENV} at a file this user owns"
        ) from None
    try:
        os.write(fd, secrets.token_bytes(SECRET_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    return _read(path)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FedbenchError(f"{path}: fedbench's per-user secret is not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise FedbenchError(
                f"{path}: fedbench's per-user secret must belong to this user and be "
                f"readable by nobody else (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"chmod 600 {path}, or remove it to have a new one made"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    if len(data) < SECRET_BYTES:
        raise FedbenchError(
            f"{path}: fedbench's per-user secret is {len(data)} bytes, expected "
            f"{SECRET_BYTES}; remove it to have a new one made"
        )
    return data


def key_id(secret: bytes | None = None) -> str:
    """A public name of the key (it reveals nothing of the secret)."""
    digest = hmac.new(secret or user_secret(), _ID_LABEL, hashlib.sha256).hexdigest()
    return digest[:16]


def sign(label: str, data: bytes, secret: bytes | None = None) -> str:
    """HMAC-SHA256 of `data` under this user's key; `label` separates uses."""
    mac = hmac.new(secret or user_secret(), label.encode() + b"\0", hashlib.sha256)
    mac.update(data)
    return mac.hexdigest()


def verify(label: str, data: bytes, mac: str, secret: bytes | None = None) -> bool:
    return hmac.compare_digest(sign(label, data, secret), mac)
