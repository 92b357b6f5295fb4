"""A user's Flower app (`app=<folder or module>`): where it is and what it names.

A Flower app is a folder whose pyproject.toml has `[tool.flwr.app]` with
`components` (`clientapp`, `serverapp`: "module:attribute") and run-config
defaults under `config` (Flower's `flwr new` layout). `app=` takes that
folder, or an importable module/package inside it (the folder is found by
walking up to the pyproject.toml). `app_run_config` overrides the defaults;
a key the app does not declare is refused, as `flwr run --run-config` does.

On a device the folder may not exist (deployment ships the app inside a
Flower app bundle): the AppConfig then arrives as a mapping and is used as is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fedbench.errors import FedbenchError, choices, closest

ConfigValue = bool | int | float | str
T = TypeVar("T")


class AppError(FedbenchError):
    """A user's app failed where fedbench calls it (its import, its ServerApp's start).

    The message names the app and the exception in one line; `trace` is the
    app's traceback, which belongs in the run's log rather than on the console.
    """

    def __init__(self, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.trace = trace


def app_failure(app: str, what: str, exc: BaseException, root: str | None = None) -> AppError:
    """`app <name>: <what> raised ValueError at task.py:12: <its message>`, traceback kept.

    `root`: the app's folder; the line named is the last one of the traceback in it.
    """
    import traceback

    text = " ".join(str(exc).split()) or "(no message)"
    at = _where_in(exc, root) if root else ""
    return AppError(
        f"app {app}: {what} raised {type(exc).__name__}{at}: {text[:300]}",
        "".join(traceback.format_exception(exc)),
    )


def _where_in(exc: BaseException, root: str) -> str:
    """` at <file relative to root>:<line>` of the innermost frame in the app's folder."""
    import traceback

    folder = Path(root).resolve()
    found = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(folder):
            found = f" at {path.relative_to(folder)}:{frame.lineno}"
    return found


# eq=False: hashed by identity, so a worker caches the app it loaded per decoded config.
@dataclass(frozen=True, eq=False)
class AppConfig:
    root: str  # the app's folder (where its pyproject.toml is)
    clientapp: str  # "module:attribute" of its ClientApp
    serverapp: str | None = None  # "module:attribute" of its ServerApp, if it has one
    run_config: Mapping[str, ConfigValue] = field(default_factory=dict)
    name: str = "app"  # the project name, for the app bundle
    # Aggregate with the strategy the app's ServerApp starts (False: `algorithm=` was given).
    own_strategy: bool = True

    @classmethod
    def from_config(cls, value: object, where: str) -> AppConfig:
        if isinstance(value, AppConfig):
            return value
        if isinstance(value, str):
            return load_app(value, {}, where)
        if isinstance(value, Mapping):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                key = sorted(unknown)[0]
                raise FedbenchError(
                    f"{where}.{key}: unknown key{closest(key, cls.__dataclass_fields__)}"
                )
            return cls(**{k: v for k, v in value.items()})
        raise FedbenchError(f"{where} must be a Flower app folder or module, got {value!r}")

    def to_config(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "clientapp": self.clientapp,
            "serverapp": self.serverapp,
            "run_config": dict(self.run_config),
            "name": self.name,
            "own_strategy": self.own_strategy,
        }

    def importable(self) -> None:
        """Put the app's folder on sys.path (as Flower does for an installed bundle)."""
        if self.root and Path(self.root).is_dir() and self.root not in sys.path:
            sys.path.insert(0, self.root)

    def load(self, reference: str, kind: type[T], what: str) -> T:
        """The object a component reference ("module:attribute") of the app names."""
        self.importable()
        module_name, _, attr = reference.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise FedbenchError(f"app {what} {reference!r}: cannot import ({exc})") from None
        except Exception as exc:  # the app's own module code failed while importing
            raise app_failure(self.name, f"importing {what} {reference!r}", exc) from None
        loaded = getattr(module, attr, None)
        if not isinstance(loaded, kind):
            raise FedbenchError(f"app {what} {reference!r}: not a flwr {kind.__name__}")
        return loaded


def load_app(spec: str, overrides: Mapping[str, Any], where: str = "app") -> AppConfig:
    """The app at `spec` (a folder, or a module inside one), its run config overridden."""
    root = _find_root(spec, where)
    pyproject = root / "pyproject.toml"
    try:
        doc = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FedbenchError(f"{where}={spec}: cannot read {pyproject}: {exc}") from None
    flwr_app = doc.get("tool", {}).get("flwr", {}).get("app", {})
    components = flwr_app.get("components", {})
    clientapp = components.get("clientapp")
    if not isinstance(clientapp, str) or ":" not in clientapp:
        raise FedbenchError(
            f"{where}={spec}: {pyproject} has no [tool.flwr.app.components] clientapp "
            '= "module:attribute"'
        )
    serverapp = components.get("serverapp")
    defaults = _flatten(flwr_app.get("config", {}))
    run_config = dict(defaults)
    for key, value in overrides.items():
        if key not in defaults:
            raise FedbenchError(
                f"app_run_config.{key}: not a run-config key of the app{closest(key, defaults)}; "
                f"valid: {choices(defaults)}"
            )
        run_config[key] = _run_config_value(key, value, defaults[key])
    name = str(doc.get("project", {}).get("name", root.name))
    return AppConfig(
        root=str(root),
        clientapp=clientapp,
        serverapp=serverapp if isinstance(serverapp, str) else None,
        run_config=run_config,
        name=name,
    )


def _find_root(spec: str, where: str) -> Path:
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "pyproject.toml").is_file():
            raise FedbenchError(f"{where}={spec}: no pyproject.toml in that folder")
        return path.resolve()
    try:
        found = importlib.util.find_spec(spec)
    except (ImportError, ValueError):
        found = None
    if found is None or found.origin is None:
        raise FedbenchError(
            f"{where}={spec}: neither a folder nor an importable module (a Flower app folder "
            "with a pyproject.toml, e.g. app=path/to/my-app)"
        )
    for parent in Path(found.origin).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    raise FedbenchError(f"{where}={spec}: no pyproject.toml above {found.origin}")


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, ConfigValue]:
    """Nested TOML tables as Flower's dotted run-config keys."""
    out: dict[str, ConfigValue] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _run_config_value(key: str, value: Any, default: ConfigValue) -> ConfigValue:
    """An override of a run-config key, of the default's type (an int is a float's too)."""
    where = f"app_run_config.{key}={value!r}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise FedbenchError(f"{where}: expected true or false, like the app's default {default}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise FedbenchError(f"{where}: expected an integer, like the app's default {default}")
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise FedbenchError(f"{where}: expected a number, like the app's default {default}")
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)  # Hydra reads `name=3` as a number; the app's key is text
    raise FedbenchError(f"{where}: expected text, like the app's default {default!r}")
