"""The `_target_` allowlist for configs loaded from disk: refused before anything is imported."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from fedbench.errors import FedbenchError
from fedbench.experiment.compose import compose_experiment
from fedbench.trust.targets import check_config, parse_allowed

SOURCE = "resume=/shared/run: config.yaml"


class MyStrategy:
    """A researcher's own class, in a module they name with allow_targets=."""


def my_factory() -> None:
    """A function: admitted only from a module the user named."""


@pytest.fixture(scope="module")
def stock() -> dict[str, Any]:
    return compose_experiment(["experiment=smoke"]).to_config()


def test_fedbench_s_own_configs_pass(stock: dict[str, Any]) -> None:
    check_config(stock, (), SOURCE)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("torch.load", ""),
        ("builtins.open", ""),
        ("os.system", ""),
        ("subprocess.Popen", ""),
        # Inside the allowlist by name, outside it by what they resolve to.
        ("torch.nn.modules.module.torch.load", "it goes through the module torch"),
        ("fedbench.runtime.launch.os.execvp", "it goes through the module os"),
        ("fedbench.security.issue_secret", "it is a function from fedbench.security"),
    ],
)
def test_a_target_outside_the_allowlist_is_one_line_naming_it(
    stock: dict[str, Any], target: str, why: str
) -> None:
    config = {**stock, "strategy": {"_target_": target, "f": "x"}}
    with pytest.raises(FedbenchError) as refused:
        check_config(config, (), SOURCE)
    message = str(refused.value)
    assert message.startswith(f"{SOURCE}: strategy._target_={target} is not allowed")
    assert why in message and "\n" not in message


@pytest.mark.parametrize(
    "place", [("model", "net"), ("data", "source"), ("report", "loggers", 0), ("algorithm",)]
)
def test_a_target_is_found_wherever_it_is_nested(stock: dict[str, Any], place: tuple) -> None:
    config: Any = {**stock, "report": {**stock["report"], "loggers": [{"_target_": "x.y"}]}}
    node = config
    for key in place[:-1]:
        node[key] = dict(node[key]) if isinstance(node[key], dict) else list(node[key])
        node = node[key]
    node[place[-1]] = {"_target_": "torch.load", "f": "payload.pt"}
    with pytest.raises(FedbenchError, match="torch.load is not allowed"):
        check_config(config, (), SOURCE)


def test_a_module_named_on_the_command_line_is_admitted(stock: dict[str, Any]) -> None:
    for target in (f"{__name__}.MyStrategy", f"{__name__}.my_factory"):
        config = {**stock, "strategy": {"_target_": target}}
        with pytest.raises(FedbenchError, match="allow_targets"):
            check_config(config, (), SOURCE)
        check_config(config, parse_allowed([__name__]), SOURCE)
    # Naming a module admits what is defined there, not what it re-exports.
    config = {**stock, "strategy": {"_target_": f"{__name__}.sys.exit"}}
    with pytest.raises(FedbenchError, match="goes through the module sys"):
        check_config(config, (__name__,), SOURCE)


def test_nothing_outside_the_allowlist_is_even_imported(stock: dict[str, Any]) -> None:
    assert "antigravity" not in sys.modules
    with pytest.raises(FedbenchError):
        check_config({**stock, "strategy": {"_target_": "antigravity.geohash"}}, (), SOURCE)
    assert "antigravity" not in sys.modules


def test_an_app_from_a_folder_needs_its_module_named(stock: dict[str, Any]) -> None:
    app = {"root": "/shared/app", "clientapp": "evil.client:app", "serverapp": "evil.server:app"}
    with pytest.raises(FedbenchError, match=r"app.clientapp='evil.client:app' would import"):
        check_config({**stock, "app": app}, (), SOURCE)
    check_config({**stock, "app": app}, ("evil",), SOURCE)


@pytest.mark.parametrize("bad", [3, ["ok", "not a module!"], [None]])
def test_allow_targets_takes_module_names(bad: object) -> None:
    with pytest.raises(FedbenchError, match="allow_targets"):
        parse_allowed(bad)
