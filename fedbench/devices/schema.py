"""Build frozen dataclasses from parsed YAML, refusing anything off-spec.

Device profiles and the emulator's constants are data files written by
hand; a typo there would otherwise surface as a wrong number far away. So
every field is checked against its dataclass type, and numeric fields are
annotated with a `Bound` (unit and plausible range), e.g.
`Annotated[float, Bound("GHz", 0.1, 5.0)]`: a frequency written in MHz where
GHz is expected is refused instead of emulating a 1500 GHz core.
Every message names the file, the key path and what was expected.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fedbench.errors import FedbenchError, closest

T = TypeVar("T")


@dataclass(frozen=True)
class Bound:
    """Unit and inclusive plausible range of a numeric field."""

    unit: str
    lo: float
    hi: float


def join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


class Reader:
    """Converts mappings to dataclasses; errors are prefixed with the file name."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, message: str) -> FedbenchError:
        return FedbenchError(f"{self.file}: {path or '<top>'}: {message}")

    def build(self, cls: type[T], data: object, path: str = "") -> T:
        if not isinstance(data, Mapping):
            raise self.fail(path, f"expected a mapping of {_field_names(cls)}, got {data!r}")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
        for key in data:
            if key not in fields:
                raise self.fail(
                    join(path, str(key)),
                    f"unknown key{closest(str(key), fields)}; valid keys: {', '.join(fields)}",
                )
        hints = typing.get_type_hints(cls, include_extras=True)
        values: dict[str, Any] = {}
        for name, f in fields.items():
            if name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise self.fail(join(path, name), "missing required key")
                continue
            values[name] = self.value(hints[name], data[name], join(path, name))
        return cls(**values)

    def value(self, tp: Any, raw: object, path: str) -> Any:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            b = next((m for m in tp.__metadata__ if isinstance(m, Bound)), None)
            return self.number(args[0], raw, path, b) if b else self.value(args[0], raw, path)
        if origin in (typing.Union, types.UnionType):
            if raw is None and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            return self.value(inner[0], raw, path)
        if dataclasses.is_dataclass(tp):
            return self.build(tp, raw, path)  # type: ignore[arg-type]
        if origin is tuple and isinstance(raw, Mapping) and _named(args):
            # A mapping of named items (`clusters: {gold: {...}}`): the key is
            # the item's name, and paths read clusters.gold.cores.
            return tuple(
                self.build(
                    args[0],
                    {**_as_dict(v, self, join(path, str(k))), "name": str(k)},
                    join(path, str(k)),
                )
                for k, v in raw.items()
            )
        if origin is tuple:
            if not isinstance(raw, list | tuple):
                raise self.fail(path, f"expected a list, got {raw!r}")
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(self.value(args[0], x, join(path, i)) for i, x in enumerate(raw))
            if len(raw) != len(args):
                raise self.fail(path, f"expected a list of {len(args)} items, got {raw!r}")
            pairs = enumerate(zip(args, raw, strict=True))
            return tuple(self.value(a, x, join(path, i)) for i, (a, x) in pairs)
        if origin in (Mapping, dict, typing.Mapping):
            if not isinstance(raw, Mapping):
                raise self.fail(path, f"expected a mapping, got {raw!r}")
            return {str(k): self.value(args[1], v, join(path, str(k))) for k, v in raw.items()}
        if tp is str:
            if not isinstance(raw, str):
                raise self.fail(path, f"expected a string, got {raw!r}")
            return raw
        if tp is bool:
            if not isinstance(raw, bool):
                raise self.fail(path, f"expected true or false, got {raw!r}")
            return raw
        if tp in (int, float):
            return self.number(tp, raw, path, None)
        # A field type this reader does not know is a bug in fedbench, not a user error.
        raise TypeError(f"schema: unsupported field type {tp!r} at {path}")

    def number(self, tp: type, raw: object, path: str, b: Bound | None) -> float:
        unit = f" ({b.unit})" if b else ""
        is_int = isinstance(raw, int) and not isinstance(raw, bool)
        if not (is_int or (tp is float and isinstance(raw, float))):
            kind = "an integer" if tp is int else "a number"
            raise self.fail(path, f"expected {kind}{unit}, got {raw!r}")
        assert isinstance(raw, int | float)
        value: float = float(raw) if tp is float else int(raw)
        if b is not None and not b.lo <= value <= b.hi:
            hint = _unit_hint(b, value)
            raise self.fail(path, f"expected {b.unit} in [{b.lo:g}, {b.hi:g}], got {raw!r}{hint}")
        return value


def _unit_hint(b: Bound, value: float) -> str:
    # The usual slip is a unit off by 1000 (MHz for GHz, mW for W, ms for s).
    for factor, word in ((1000.0, "1000x too large"), (1e-3, "1000x too small")):
        if b.lo <= value / factor <= b.hi:
            return f" - {word}: is it in the wrong unit? {b.unit} expected"
    return ""


def _named(args: tuple[Any, ...]) -> bool:
    return (
        len(args) == 2
        and args[1] is Ellipsis
        and dataclasses.is_dataclass(args[0])
        and "name" in {f.name for f in dataclasses.fields(args[0])}
    )


def _as_dict(raw: object, reader: Reader, path: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise reader.fail(path, f"expected a mapping, got {raw!r}")
    if "name" in raw:
        raise reader.fail(join(path, "name"), "the name is the key above; remove 'name'")
    return dict(raw)


def _key(x: object, i: int) -> str | int:
    name = getattr(x, "name", None)
    return name if dataclasses.is_dataclass(x) and isinstance(name, str) else i


def _field_names(cls: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls) if f.init)  # type: ignore[arg-type]


def numeric_paths(obj: object, path: str = "") -> list[str]:
    """Key paths of every numeric leaf of a dataclass tree (lists by index)."""
    out: list[str] = []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if f.init:
                out += numeric_paths(getattr(obj, f.name), join(path, f.name))
    elif isinstance(obj, tuple):
        for i, x in enumerate(obj):
            out += numeric_paths(x, join(path, _key(x, i)))
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        out.append(path)
    return out


def all_paths(obj: object, path: str = "") -> list[str]:
    """Every key path of a dataclass tree, leaves and inner nodes."""
    out: list[str] = [path] if path else []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if f.init:
                out += all_paths(getattr(obj, f.name), join(path, f.name))
    elif isinstance(obj, tuple):
        for i, x in enumerate(obj):
            out += all_paths(x, join(path, _key(x, i)))
    return out
