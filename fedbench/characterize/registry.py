"""The studies: one YAML each in fedbench/conf/characterize/, built through its `_target_`.

A study YAML holds the study's `_target_` (a `Study` dataclass) and the
defaults of its parameters. Command-line values (`models=a,b`,
`batch_size=16`) replace defaults of the same key, converted to the type
of the default: a list default takes a comma list of its element type, a
boolean `true`/`false`, a null default an integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from hydra.utils import get_class

from fedbench.characterize.studies.base import Study
from fedbench.errors import FedbenchError, choices, closest
from fedbench.paths import conf_dir

TARGET = "_target_"


def _dir() -> Path:
    return conf_dir() / "characterize"


def study_names() -> list[str]:
    return sorted(p.stem for p in _dir().glob("*.yaml"))


def study_config(name: str) -> dict[str, Any]:
    """The YAML of study `name` as a mapping (with its `_target_`)."""
    path = _dir() / f"{name}.yaml"
    if not path.is_file():
        names = study_names()
        raise FedbenchError(
            f"study={name!r}: no such study{closest(name, names)}; valid: all, {choices(names)}"
        )
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get(TARGET), str):
        raise FedbenchError(f"{path}: expected a mapping with a {TARGET}")
    return data


def params_of(name: str) -> list[str]:
    return [k for k in study_config(name) if k != TARGET]


def _convert(raw: str, default: Any, where: str) -> Any:
    try:
        return _value(raw, default)
    except ValueError:
        raise FedbenchError(f"{where}={raw!r}: expected {_kind(default)}") from None


def _value(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        if raw.lower() not in ("true", "false"):
            raise ValueError(raw)
        return raw.lower() == "true"
    if isinstance(default, list):
        element = default[0] if default else ""
        return [_value(x.strip(), element) for x in raw.split(",") if x.strip()]
    if default is None:
        return None if raw.lower() in ("null", "none") else int(raw)
    return type(default)(raw)


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, list):
        return f"a comma list of {_kind(default[0]) if default else 'str'}"
    return "an integer or null" if default is None else type(default).__name__


def build_study(name: str, overrides: Mapping[str, str]) -> Study:
    """Study `name` with its YAML defaults replaced by `overrides` (raw CLI strings)."""
    cfg = study_config(name)
    target = cfg.pop(TARGET)
    for key, raw in overrides.items():
        if key not in cfg:
            raise FedbenchError(
                f"{key}=...: study {name} has no parameter {key!r}{closest(key, cfg)}; "
                f"valid: {choices(cfg)}"
            )
        cfg[key] = _convert(raw, cfg[key], key)
    try:
        cls = get_class(target)
    except (ImportError, ValueError) as exc:
        where = f"fedbench/conf/characterize/{name}.yaml"
        raise FedbenchError(f"{where}: {TARGET}={target}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Study)):
        raise FedbenchError(f"fedbench/conf/characterize/{name}.yaml: {target} is not a Study")
    params: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()}
    try:
        return cls(**params)
    except TypeError as exc:  # a YAML key the study does not take
        raise FedbenchError(f"fedbench/conf/characterize/{name}.yaml: {exc}") from None
