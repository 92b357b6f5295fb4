"""Which `_target_` a config loaded from disk may name: an allowlist, checked before any import.

`resume=<folder>` rebuilds the experiment from the folder's config.yaml, and
every `_target_` in it is imported and called (Hydra's `instantiate`), so a
shared run folder would be code: `{_target_: torch.load, f: payload.pkl}` runs
a pickle, `{_target_: builtins.open, mode: w}` empties a file. A config from
disk therefore passes `check_config` first, which walks the whole tree - every
mapping with a `_target_`, wherever it is nested (strategy, model.net,
data.source, report.loggers, ...) and the app's component modules - and
refuses the first name outside the allowlist, before anything is called:

- fedbench's own packages (`fedbench.`), the device selectors
  (`strategies.`), Flower's strategies (`flwr.serverapp.strategy.`), and
  torch's `nn` and `optim`: classes only;
- modules the user names on the command line (`allow_targets=[mylab.strategies]`):
  any callable defined in them.

A name passes only if it resolves inside the allowlist all the way: only
allowed modules are imported, no attribute on the way may be a module outside
it (`torch.nn.modules.module.torch.load` is refused), and the object found
must be defined in an allowed module (a re-exported `torch.load` is refused).
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fedbench.errors import FedbenchError

TARGET_KEY = "_target_"
BUILTIN_ALLOWED: tuple[str, ...] = (
    "fedbench",
    "strategies",
    "flwr.serverapp.strategy",
    "torch.nn",
    "torch.optim",
)
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# The app's components ("module:attribute") are imported from its folder.
_APP_COMPONENTS = ("clientapp", "serverapp")


def parse_allowed(value: object) -> tuple[str, ...]:
    """`allow_targets=` from the command line: a module name or a list of them."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, (bytes, bytearray)):
        raise FedbenchError(f"allow_targets={value!r}: expected a module name or a list of them")
    out = []
    for item in items:
        if not isinstance(item, str) or not _DOTTED.fullmatch(item):
            raise FedbenchError(
                f"allow_targets: {item!r} is not a dotted module name (e.g. mylab.strategies)"
            )
        out.append(item)
    return tuple(out)


def check_config(values: Mapping[str, Any], extra: Sequence[str], source: str) -> None:
    """Refuse, in one line naming it, the first target `values` names outside the allowlist."""
    for where, target in _targets(values, ""):
        check_target(target, where, extra, source)
    app = values.get("app")
    if isinstance(app, Mapping):
        for key in _APP_COMPONENTS:
            reference = app.get(key)
            if isinstance(reference, str) and reference:
                _check_app(reference, f"app.{key}", app.get("root"), extra, source)


def check_target(target: object, where: str, extra: Sequence[str], source: str) -> object:
    """The object `target` names, if the allowlist admits it (else FedbenchError)."""
    if not isinstance(target, str) or not _DOTTED.fullmatch(target) or "." not in target:
        raise FedbenchError(f"{source}: {where}={target!r} is not a dotted class name")
    if _within(target, BUILTIN_ALLOWED + tuple(extra)) is None:
        raise _refused(target, where, source)
    obj = _resolve(target, where, extra, source)
    home = getattr(obj, "__module__", None)
    user = isinstance(home, str) and _within(home, extra) is not None
    builtin = isinstance(home, str) and _within(home, BUILTIN_ALLOWED) is not None
    if not ((builtin and inspect.isclass(obj)) or (user and callable(obj))):
        raise _refused(target, where, source, f"it is {_describe(obj)}")
    return obj


def _targets(value: object, path: str) -> Iterator[tuple[str, object]]:
    if isinstance(value, Mapping):
        if TARGET_KEY in value:
            yield (f"{path}.{TARGET_KEY}" if path else TARGET_KEY), value[TARGET_KEY]
        for key, sub in value.items():
            if key != TARGET_KEY:
                yield from _targets(sub, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            yield from _targets(sub, f"{path}[{i}]")


def _within(name: str, prefixes: Sequence[str]) -> str | None:
    return next((p for p in prefixes if name == p or name.startswith(p + ".")), None)


def _resolve(target: str, where: str, extra: Sequence[str], source: str) -> object:
    """Import the longest allowed module prefix of `target`, then walk its attributes."""
    allowed = BUILTIN_ALLOWED + tuple(extra)
    parts = target.split(".")
    obj: object = None
    rest: list[str] = []
    for i in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:i])
        if _within(name, allowed) is None:
            break  # never import a module outside the allowlist, not even a parent
        try:
            obj = importlib.import_module(name)
        except ImportError as exc:
            missing = isinstance(exc, ModuleNotFoundError) and exc.name is not None
            if missing and name.startswith(str(exc.name)):
                continue  # not a module: an attribute of a shorter prefix
            raise FedbenchError(
                f"{source}: {where}={target}: cannot import {name} ({exc})"
            ) from None
        rest = parts[i:]
        break
    if obj is None:
        raise FedbenchError(f"{source}: {where}={target}: nothing by that name can be imported")
    for attr in rest:
        if isinstance(obj, types.ModuleType) and _within(obj.__name__, allowed) is None:
            raise _refused(target, where, source, f"it goes through the module {obj.__name__}")
        if not hasattr(obj, attr):
            raise FedbenchError(f"{source}: {where}={target}: nothing by that name can be imported")
        obj = getattr(obj, attr)
    if isinstance(obj, types.ModuleType):
        raise _refused(target, where, source, f"it is the module {obj.__name__}")
    return obj


def _check_app(reference: str, where: str, root: object, extra: Sequence[str], source: str) -> None:
    module = reference.partition(":")[0]
    if _DOTTED.fullmatch(module) and _within(module, extra) is not None:
        return
    raise FedbenchError(
        f"{source}: {where}={reference!r} would import the app's code from {root} and that "
        f"is not allowed from a config on disk (nothing was imported); if you trust it, name "
        f"it on the command line: allow_targets=[{module}]"
    )


def _refused(target: str, where: str, source: str, why: str = "") -> FedbenchError:
    shown = ", ".join(f"{p}.*" for p in BUILTIN_ALLOWED)
    because = f" ({why})" if why else ""
    return FedbenchError(
        f"{source}: {where}={target} is not allowed from a config on disk{because}; nothing "
        f"was called. Allowed: {shown} classes, and modules you name on the command line "
        "(allow_targets=[mylab.module])"
    )


def _describe(obj: object) -> str:
    home = getattr(obj, "__module__", None) or "?"
    kind = "a class" if inspect.isclass(obj) else "a function" if callable(obj) else "not callable"
    return f"{kind} from {home}"
