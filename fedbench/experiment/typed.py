"""Mappings -> frozen dataclasses, checked field by field, and back.

`parse(cls, values, where)` builds a dataclass from a plain mapping (the
resolved Hydra config): every key must be a field (an unknown one is
refused with the closest valid key), every value must have the field's type
(`int`, `float`, `bool`, `str`, `X | None`, `Literal[...]`, `tuple[X, ...]`,
nested dataclasses, `Mapping[str, Any]`, or a type with a `from_config`
classmethod), floats must be finite, and bounds given with `check(...)` in
the field's metadata must hold. Every error is one FedbenchError naming the
dotted key, the value and what would be valid. `dump` is the inverse.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from fedbench.errors import FedbenchError, choices, closest

T = TypeVar("T")


@dataclass(frozen=True)
class Bounds:
    """Inclusive (`ge`, `le`) or exclusive (`gt`, `lt`) bounds of a number."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def violated(self, value: float) -> bool:
        return (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        )

    def describe(self) -> str:
        parts = [
            f"{op} {_number(bound)}"
            for op, bound in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if bound is not None
        ]
        return " and ".join(parts)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def check(
    default: Any = MISSING,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> Any:
    """A dataclass field whose numeric value must lie within the bounds."""
    meta = {"bounds": Bounds(ge, gt, le, lt)}
    if default is MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def parse(cls: type[T], values: object, where: str) -> T:
    """`cls` built from `values`; `where` is the dotted key (e.g. `train`)."""
    if isinstance(values, cls):
        return values
    if not isinstance(values, Mapping):
        raise FedbenchError(f"{where} must be a mapping of {_keys(cls)}, got {values!r}")
    hints = _hints(cls)
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for key in values:
        if key not in names:
            raise FedbenchError(
                f"{_join(where, key)}: unknown key{suggest(str(key), names)}; "
                f"valid: {choices(names)}"
            )
    out: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        path = _join(where, f.name)
        if f.name not in values:
            if f.default is MISSING and f.default_factory is MISSING:
                raise FedbenchError(f"{path}: missing (required)")
            continue
        out[f.name] = _convert(values[f.name], hints[f.name], path, f)
    try:
        return cls(**out)
    except FedbenchError:
        raise
    except (TypeError, ValueError) as exc:
        raise FedbenchError(f"{where}: {exc}") from None


def suggest(key: str, valid: Iterable[str]) -> str:
    """' (did you mean X?)': the closest valid key by spelling, else one that contains it."""
    valid = list(valid)
    hint = closest(key, valid)
    if hint:
        return hint
    containing = [v for v in valid if key and key.lower() in v.lower()]
    return f" (did you mean '{containing[0]}'?)" if len(containing) == 1 else ""


def _keys(cls: type) -> str:
    return "{" + ", ".join(f.name for f in fields(cls)) + "}"  # type: ignore[arg-type]


def _join(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def _convert(value: Any, hint: Any, path: str, f: Field[Any] | None = None) -> Any:
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        rest = [o for o in options if o is not type(None)]
        if len(rest) == 1:
            return _convert(value, rest[0], path, f)
        errors = []
        for option in rest:
            try:
                return _convert(value, option, path, f)
            except FedbenchError as exc:
                errors.append(str(exc))
        raise FedbenchError(errors[0])
    if origin is Literal:
        valid = get_args(hint)
        if value not in valid:
            raise FedbenchError(f"{path}={value!r}: valid: {choices(valid)}")
        return value
    if origin is tuple:
        args = get_args(hint)
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise FedbenchError(f"{path} must be a list, got {value!r}")
        item = args[0]
        return tuple(_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict) or hint in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise FedbenchError(f"{path} must be a mapping, got {value!r}")
        return dict(value)
    if hint is Any:
        return value
    if isinstance(hint, type) and is_dataclass(hint):
        builder = getattr(hint, "from_config", None)
        if builder is not None:
            return builder(value, path)
        return parse(hint, value, path)
    if hint is bool:
        if not isinstance(value, bool):
            raise FedbenchError(f"{path} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FedbenchError(f"{path} must be an integer, got {value!r}")
        return _bounded(value, path, f)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FedbenchError(f"{path} must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise FedbenchError(f"{path} must be a finite number, got {value!r}")
        return _bounded(float(value), path, f)
    if hint is str:
        if not isinstance(value, str):
            raise FedbenchError(f"{path} must be a string, got {value!r}")
        return value
    builder = getattr(hint, "from_config", None)
    if builder is not None:
        return builder(value, path)
    raise TypeError(f"{path}: no conversion for the type {hint!r}")  # a schema bug, not a user's


def _bounded(value: Any, path: str, f: Field[Any] | None) -> Any:
    bounds = f.metadata.get("bounds") if f is not None else None
    if isinstance(bounds, Bounds) and bounds.violated(value):
        raise FedbenchError(f"{path}={value!r}: must be {bounds.describe()}")
    return value


def dump(obj: Any) -> Any:
    """The plain JSON-able form `parse` reads back: dataclasses -> dicts, tuples -> lists."""
    to_config = getattr(obj, "to_config", None)
    if to_config is not None:
        return to_config()
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: dump(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [dump(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): dump(v) for k, v in obj.items()}
    return obj
