"""The Flower app fedbench submits with `flwr run`: a real app bundle (FAB) folder.

- fedbench's own app: a pyproject.toml whose components are fedbench's
  ServerApp and ClientApp (every device has fedbench installed).
- A user's app (`app=`): a copy of the app's folder - its code travels with
  the run, so a device needs no copy of it - whose pyproject.toml names
  fedbench's ServerApp and, as ClientApp, `fedbench_seat:app`, a module
  written into the bundle: on a device with fedbench it is fedbench's
  ClientApp (the app under the device mod); on a stock Flower device it is
  the app's own ClientApp, unchanged, and the server records that device as
  unprofiled.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from fedbench.experiment.app import AppConfig
from fedbench.experiment.codec import EXPERIMENT_KEY

SERVERAPP = "fedbench.server.app:app"
CLIENTAPP = "fedbench.client.app:app"
SEAT_MODULE = "fedbench_seat"

_SEAT = '''"""This bundle's ClientApp: {app} under fedbench's device mod, or as it is.

Written by fedbench (fedbench.runtime.bundle). Where fedbench is installed
the app runs under its device mod (seated as a fleet device, metered);
elsewhere Flower runs the app's own ClientApp and the server records the
device as unprofiled.
"""

from flwr.clientapp import ClientApp


def _client_app() -> ClientApp:
    try:
        from fedbench.client.app import app as seated
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] != "fedbench":
            raise
        from {module} import {attr} as own

        return own
    return seated


app = _client_app()
'''


def write_bundle(folder: Path, app: AppConfig | None) -> Path:
    """The bundle folder for `flwr run`: fedbench's own app, or `app` seated."""
    if folder.exists():
        shutil.rmtree(folder)
    if app is None:
        folder.mkdir(parents=True)
        _write_pyproject(folder, _own_pyproject())
        return folder
    shutil.copytree(
        app.root,
        folder,
        ignore=shutil.ignore_patterns(".venv", "__pycache__", ".git", "outputs", "multirun"),
    )
    doc = tomllib.loads((Path(app.root) / "pyproject.toml").read_text())
    flwr_app = doc.setdefault("tool", {}).setdefault("flwr", {}).setdefault("app", {})
    flwr_app.setdefault("publisher", "fedbench")
    flwr_app["components"] = {"serverapp": SERVERAPP, "clientapp": f"{SEAT_MODULE}:app"}
    flwr_app.setdefault("config", {})[EXPERIMENT_KEY] = ""
    doc["tool"]["flwr"].pop("federations", None)  # fedbench names the SuperLink itself
    _write_pyproject(folder, doc)
    module, _, attr = app.clientapp.partition(":")
    (folder / f"{SEAT_MODULE}.py").write_text(
        _SEAT.format(app=app.clientapp, module=module, attr=attr)
    )
    return folder


def _own_pyproject() -> dict[str, Any]:
    return {
        "build-system": {"requires": ["setuptools>=68"], "build-backend": "setuptools.build_meta"},
        "project": {"name": "fedbench", "version": "0.1.0", "dependencies": []},
        "tool": {
            "flwr": {
                "app": {
                    "publisher": "fedbench",
                    "components": {"serverapp": SERVERAPP, "clientapp": CLIENTAPP},
                    "config": {EXPERIMENT_KEY: ""},
                }
            }
        },
    }


def _write_pyproject(folder: Path, doc: dict[str, Any]) -> None:
    (folder / "pyproject.toml").write_bytes(tomli_w.dumps(doc).encode())
