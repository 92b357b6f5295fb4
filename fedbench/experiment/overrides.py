"""Hydra's refusals of a command line, as fedbench's one line naming the key and what is valid.

Hydra refuses an override in several layers before fedbench's typed
experiment sees it: a key the composed config does not have (`scenario.dayz=5`,
Hydra: "Could not override ... Key 'dayz' is not in struct"), a group option
with no YAML (`strategy=orrt`, Hydra: fifteen lines of search path), `+` on a
key that exists, `~` on one that does not. `explain` turns each into a
FedbenchError that names the override, the closest valid key or option, and
all valid ones; an unknown key that is a key elsewhere (`train.deadline_s`)
says where it belongs. Every entry point that composes fedbench/conf/ goes through it
(`python -m fedbench`, `fedbench.fleet describe`, `flwr run .`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any

import yaml
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fedbench.devices.schema import closest
from fedbench.errors import FedbenchError, choices
from fedbench.paths import conf_dir

# Groups whose options are recipes spanning other groups (`@package _global_`).
_GLOBAL_GROUPS = ("experiment", "hydra", "characterize")


def explain(exc: BaseException, overrides: Sequence[str]) -> FedbenchError | None:
    """The one-line error for Hydra's refusal `exc` of `overrides`; None if it is no refusal."""
    if isinstance(exc, FedbenchError):
        return exc
    if isinstance(exc, MissingConfigException):
        return _missing_option(exc)
    if isinstance(exc, OverrideParseException):
        return FedbenchError(_first_lines(str(exc)))
    if isinstance(exc, ConfigCompositionException):
        cause = exc.__cause__
        key = getattr(cause, "full_key", None)
        overriding = str(exc).startswith("Could not override")
        if overriding and isinstance(cause, OmegaConfBaseException) and isinstance(key, str):
            return unknown_key(key, overrides)
        return FedbenchError(_composition(str(exc), cause))
    if isinstance(exc, OmegaConfBaseException):
        key = getattr(exc, "full_key", None)
        where = f"{key}: " if key else ""
        return FedbenchError(f"{where}{_first_lines(str(exc))}")
    return None


def unknown_key(key: str, overrides: Sequence[str]) -> FedbenchError:
    """`scenario.dayz=5`: the keys valid there, the closest one, and where else `dayz` is a key."""
    given = _given(key, overrides)
    parent, _, leaf = key.rpartition(".")
    others = [o for o in overrides if _key_of(o) != key]
    cfg = _composed(others)
    node: Any = cfg if not parent else OmegaConf.select(cfg, parent) if cfg is not None else None
    if cfg is not None and parent and not isinstance(node, DictConfig):
        shown = "a list" if isinstance(node, ListConfig) else f"the value {node!r}"
        return FedbenchError(f"{given}: {parent} is {shown}, not a group of keys")
    keys = node.keys() if isinstance(node, DictConfig) else ()
    valid = [str(k) for k in keys if k not in ("hydra", "_target_")]
    message = f"{given}: unknown key{closest(leaf, valid)}"
    if valid:
        message += f"; valid{' in ' + parent if parent else ''}: {choices(valid)}"
    elsewhere = [p for p in _places(leaf, cfg) if p != key]
    if elsewhere:
        message += f"; '{leaf}' is a key of {', '.join(elsewhere[:6])}"
    return FedbenchError(message)


def _missing_option(exc: MissingConfigException) -> FedbenchError:
    missing = str(exc.missing_cfg_file or "")
    group, _, option = missing.rpartition("/")
    options = [str(o) for o in exc.options or []]
    if not group:
        return FedbenchError(_first_lines(str(exc)))
    return FedbenchError(
        f"{group.replace('/', '.')}={option}: no such option{closest(option, options)}; "
        f"valid: {choices(options) or 'none'} (the YAMLs in fedbench/conf/{group}/)"
    )


def _composition(message: str, cause: BaseException | None) -> str:
    appended = re.match(r"Could not append to config\. An item is already at '([^']+)'", message)
    if appended:
        key = appended.group(1)
        return (
            f"+{key}: {key} already exists; set it without the + ({key}=...), "
            f"or with ++ to add or override"
        )
    deleted = re.match(r"Could not delete from config\. '([^']+)' does not exist", message)
    if deleted:
        return f"~{deleted.group(1)}: no such key to delete"
    text = _first_lines(message)
    if cause is not None and str(cause).strip():
        text += f" ({str(cause).strip().splitlines()[0]})"
    return text


def _first_lines(text: str) -> str:
    """Hydra's message up to its search path and advice, as one line."""
    kept: list[str] = []
    for line in text.strip().splitlines():
        if line.startswith(("Config search path", "Set the environment", "See ")):
            break
        if line.strip():
            kept.append(line.strip())
    return " ".join(kept)


def _key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _given(key: str, overrides: Sequence[str]) -> str:
    """The override as the user typed it (`scenario.dayz=5`), else the key."""
    return next((o for o in overrides if _key_of(o) == key), key)


def _composed(overrides: Sequence[str]) -> DictConfig | None:
    """The config with these overrides (without the refused one); None if they fail too."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    kept = [o for o in overrides if not o.startswith("-") and not _key_of(o).startswith("hydra")]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
            return compose(config_name="config", overrides=kept)
    except Exception:  # noqa: BLE001 - another refusal: report the first one only
        return None
    finally:
        GlobalHydra.instance().clear()


def _places(leaf: str, cfg: DictConfig | None) -> list[str]:
    """Where else `leaf` is a key: paths of this config, and `group=option`s that have it."""
    found: list[str] = []
    if cfg is not None:
        found += [p for p in _paths(OmegaConf.to_container(cfg, resolve=False)) if _ends(p, leaf)]
    for group, option in _group_keys().get(leaf, ()):
        found.append(f"{group}={option} ({group}.{leaf})")
    return list(dict.fromkeys(found))


def _ends(path: str, leaf: str) -> bool:
    return path == leaf or path.endswith("." + leaf)


def _paths(node: object, prefix: str = "") -> Iterator[str]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            path = f"{prefix}{k}"
            if path == "hydra":
                continue
            yield path
            yield from _paths(v, path + ".")


@cache
def _group_keys() -> dict[str, list[tuple[str, str]]]:
    """key -> the (group, option)s whose YAML sets it at their top level."""
    out: dict[str, list[tuple[str, str]]] = {}
    root = conf_dir()
    for path in sorted(root.glob("*/*.yaml")):
        group = path.parent.name
        if group in _GLOBAL_GROUPS:
            continue
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        for key in data if isinstance(data, dict) else ():
            if key != "defaults" and not str(key).startswith("_"):
                out.setdefault(str(key), []).append((group, path.stem))
    return out
