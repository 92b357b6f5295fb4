"""A simulation session's environment is its own: the next call starts from the caller's.

`scoped_environ` sets names for a block and puts each back (its value, or its
absence) however the block ends; `SimulationRuntime.run` sets everything Ray's
processes inherit through it, so after a session - even one whose `ray.init`
failed - this process's environment is the one it had before.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import flwr.simulation  # noqa: F401  sets RAY_ENABLE_UV_RUN_RUNTIME_ENV once, when imported
import pytest
import ray

from fedbench.runtime import ray_auth
from fedbench.runtime.base import Apps
from fedbench.runtime.environ import scoped_environ
from fedbench.runtime.limits import ARENA_ENV
from fedbench.runtime.simulation import ACCEL_OVERRIDE_ENV, SimulationRuntime
from fedbench.runtime.watchdog import TOKEN_ENV


def test_scoped_environ_puts_back_values_and_absences(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FB_TEST_KEPT", "old")
    monkeypatch.setenv("FB_TEST_HIDDEN", "users")
    monkeypatch.delenv("FB_TEST_NEW", raising=False)
    before = dict(os.environ)
    with (
        pytest.raises(RuntimeError),
        scoped_environ({"FB_TEST_KEPT": "new", "FB_TEST_NEW": "1"}, unset=["FB_TEST_HIDDEN"]),
    ):
        assert os.environ["FB_TEST_KEPT"] == "new" and os.environ["FB_TEST_NEW"] == "1"
        assert "FB_TEST_HIDDEN" not in os.environ
        raise RuntimeError("the block fails")
    assert dict(os.environ) == before


class _Stop(Exception):
    """Raised by the stand-in `ray.init`: the session ends before Ray starts."""


def test_a_simulation_session_leaves_the_environment_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set-up and tear-down of `run` up to `ray.init`, without a Ray node: what the
    session sets is there when Ray would start, and gone after."""
    monkeypatch.setenv("RAY_DEDUP_LOGS", "1")
    for name in [*ARENA_ENV, ACCEL_OVERRIDE_ENV, TOKEN_ENV, ray_auth.MODE_ENV]:
        monkeypatch.delenv(name, raising=False)
    seen: list[dict[str, str]] = []

    def init(**kwargs: Any) -> None:
        seen.append(dict(os.environ))
        raise _Stop

    monkeypatch.setattr(ray, "init", init)
    runtime = SimulationRuntime(enforce_caps=True, ray_temp_dir=str(tmp_path))
    experiment: Any = SimpleNamespace(verbose=True)  # run reads only this before ray.init
    apps = Apps(server=None, client=None)  # type: ignore[arg-type]
    for _ in range(2):  # the second call starts from what the first found
        before = dict(os.environ)
        with pytest.raises(_Stop):
            runtime.run(experiment, tmp_path, apps)
        assert dict(os.environ) == before
    for env in seen:
        assert env["RAY_DEDUP_LOGS"] == "0" and env[ACCEL_OVERRIDE_ENV] == "0"
        assert all(env[k] == v for k, v in ARENA_ENV.items())
        assert TOKEN_ENV in env and env[ray_auth.MODE_ENV] == "token"
