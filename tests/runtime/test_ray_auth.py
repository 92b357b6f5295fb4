"""Ray's token authentication is on for one private session only, and leaves nothing behind.

Within `private_token` this process's Ray (the driver) and whatever it starts
require a fresh token from a 0600 file; after it, the environment, Ray's
config in this process and its cached token are what they were, so the next
run - or a joined cluster with the user's own RAY_AUTH_TOKEN - is not handed
this session's settings.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, get_authentication_mode

from fedbench.runtime.ray_auth import MODE_ENV, PATH_ENV, TOKEN_ENV, private_token


def test_a_session_has_its_own_token_and_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MODE_ENV, raising=False)
    monkeypatch.delenv(PATH_ENV, raising=False)
    monkeypatch.setenv(TOKEN_ENV, "the-users-own-cluster-token")
    assert get_authentication_mode() == AuthenticationMode.DISABLED
    tokens = []
    for _ in range(2):
        with private_token(str(tmp_path)) as path:
            token = Path(path).read_text()
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert os.environ[MODE_ENV] == "token" and os.environ[PATH_ENV] == path
            assert TOKEN_ENV not in os.environ  # it would take precedence over the file
            assert get_authentication_mode() == AuthenticationMode.TOKEN
            assert AuthenticationTokenLoader.instance().get_raw_token() == token
            assert token not in str(os.environ)
            tokens.append(token)
        assert not os.path.exists(path)
        assert MODE_ENV not in os.environ and PATH_ENV not in os.environ
        assert os.environ[TOKEN_ENV] == "the-users-own-cluster-token"
        assert get_authentication_mode() == AuthenticationMode.DISABLED
    assert tokens[0] != tokens[1] and all(len(t) == 64 for t in tokens)


def test_a_planted_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("attacker's token")
    os.symlink(tmp_path / "elsewhere", tmp_path / "ray_auth_token")
    with pytest.raises(FileExistsError), private_token(str(tmp_path)):
        pass
    assert (tmp_path / "elsewhere").read_text() == "attacker's token"
