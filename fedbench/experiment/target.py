"""A config group that names its class: `_target_` plus the class's arguments.

The class's constructor signature is the group's schema: `Target.from_config`
checks, before anything is built, that the `_target_` can be imported, that
every key is one of its parameters (an unknown key is refused with the
closest valid one), that no required parameter is missing, and that simple
values (int, float, bool, str, Literal, X | None) have the annotated type.
Ranges stay in the constructors, which raise FedbenchError.
"""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from fedbench.errors import FedbenchError, choices
from fedbench.experiment.typed import _convert, dump, suggest

TARGET_KEY = "_target_"
_SIMPLE = (int, float, bool, str)


# eq=False: its params are a dict; a Target is hashed and compared by identity.
@dataclass(frozen=True, eq=False)
class Target:
    """`_target_` and the keyword arguments it is built with."""

    target: str
    params: Mapping[str, Any]
    where: str = ""  # the config key, for error messages

    @classmethod
    def from_config(cls, values: object, where: str) -> Target:
        if isinstance(values, Target):
            return values
        if not isinstance(values, Mapping) or TARGET_KEY not in values:
            raise FedbenchError(f"{where}.{TARGET_KEY}: missing (the class to build)")
        target = values[TARGET_KEY]
        if not isinstance(target, str) or not target:
            raise FedbenchError(f"{where}.{TARGET_KEY} must be a dotted class name, got {target!r}")
        params = {str(k): v for k, v in values.items() if k != TARGET_KEY}
        check_arguments(locate(target, where), params, where)
        return cls(target, params, where)

    def to_config(self) -> dict[str, Any]:
        return {TARGET_KEY: self.target, **dump(dict(self.params))}

    def build(self, **extra: Any) -> Any:
        """Instantiate the class; a user mistake in its arguments is one FedbenchError line."""
        try:
            return instantiate({**self.to_config(), **extra}, _convert_="all")
        except InstantiationException as exc:
            cause = exc.__cause__
            if isinstance(cause, FedbenchError):
                known = str(cause).startswith(self.where)  # the constructor named the key
                raise FedbenchError(str(cause) if known else f"{self.where}: {cause}") from None
            if isinstance(cause, (TypeError, ValueError)):
                raise FedbenchError(f"{self.where} ({self.target}): {cause}") from None
            raise


def locate(target: str, where: str) -> Any:
    """The object `target` names ("package.module.Name"), or a clear error."""
    module_name, _, attr = target.rpartition(".")
    try:
        module = importlib.import_module(module_name) if module_name else None
    except ModuleNotFoundError:
        module = None
    if module is None or not hasattr(module, attr):
        raise FedbenchError(f"{where}.{TARGET_KEY}: nothing named '{target}' can be imported")
    return getattr(module, attr)


def check_arguments(obj: Any, params: Mapping[str, Any], where: str) -> None:
    """Refuse keys `obj` does not take, missing required ones, and ill-typed simple values."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return  # not introspectable (a C builtin): the constructor is the check
    parameters = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    named = [
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    if not takes_any:
        for key in params:
            if key not in named:
                raise FedbenchError(
                    f"{where}.{key}: not an argument of {_name(obj)}{suggest(key, named)}; "
                    + (f"valid: {choices(named)}" if named else "it takes none")
                    + f" (drop it with ~{where}.{key})"
                )
    for name in named:
        p = parameters[name]
        if p.default is inspect.Parameter.empty and name not in params:
            raise FedbenchError(f"{where}.{name}: missing (required by {_name(obj)})")
    hints = _hints(obj)
    for key, value in params.items():
        hint = hints.get(key)
        if hint is not None and _is_simple(hint):
            _convert(value, hint, f"{where}.{key}")


def _hints(obj: Any) -> dict[str, Any]:
    init = obj.__init__ if inspect.isclass(obj) else obj
    try:
        return typing.get_type_hints(init)
    except Exception:  # noqa: BLE001 - unresolvable annotations: skip the type check
        return {}


def _is_simple(hint: Any) -> bool:
    """A type `_convert` can check without building anything."""
    if hint in _SIMPLE:
        return True
    origin = get_origin(hint)
    if origin is Literal:
        return True
    if origin is Union or origin is types.UnionType:
        return all(a is type(None) or _is_simple(a) for a in get_args(hint))
    return False


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", repr(obj))
