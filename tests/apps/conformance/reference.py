"""Run a conformance app under plain Flower's simulation engine and return its metrics.

This is the reference half of the conformance check: with every node picked every
round, an app's per-round metrics under fedbench must equal what this returns for
the same number of nodes (to the last digit where the app is deterministic).

How it runs an app, and why:

* The app's ServerApp and ClientApp objects are imported from the modules its
  pyproject's `[tool.flwr.app.components]` name, with its folder on sys.path only
  for the call (Ray copies the driver's sys.path to its workers when it starts,
  so the actors import the same modules).
* Flower's public `run_simulation` gives the app an empty run config, so an app
  could not read `num-server-rounds`; this calls Flower's own `_run_simulation`
  the way `flwr run` does (`is_app=True`, `app_dir`, the run config fused from the
  pyproject), which gives every node and the ServerApp the app's defaults.
* The metrics are what the app itself writes to results.json in the working
  directory (a fresh folder per run); Flower's classes are not patched.
* Ray gets two logical CPUs (one per ClientApp actor; more than the host has
  would wait forever), binds to 127.0.0.1, and is shut down before returning.

    python -m tests.apps.conformance.reference stateful nodes=3
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

APPS_DIR = Path(__file__).resolve().parent
APPS = (
    "legacy_server_fn",
    "secagg_dp",
    "custom_start",
    "stateful",
    "central_and_federated_eval",
    "sklearn_app",
)
# Per-round sections of results.json, each {round: {metric: value}}.
SECTIONS = ("train", "evaluate", "central")
# Two ClientApp actors at once; Ray's CPUs are logical, and a request larger than
# init_args' num_cpus is never satisfied (the run hangs), so keep both in step.
BACKEND_CPUS = 2
T = TypeVar("T")


@dataclass(frozen=True)
class AppSpec:
    """What a conformance app's pyproject.toml says about it."""

    name: str
    root: Path
    serverapp: str  # "module:attribute"
    clientapp: str  # "module:attribute"
    num_supernodes: int  # [tool.flwr.federations.local-simulation] options.num-supernodes


def read_app(app: str) -> AppSpec:
    """The conformance app named `app` (a folder under tests/apps/conformance, or a path)."""
    root = (APPS_DIR / app) if (APPS_DIR / app).is_dir() else Path(app).resolve()
    doc = tomllib.loads((root / "pyproject.toml").read_text())
    flwr = doc["tool"]["flwr"]
    components = flwr["app"]["components"]
    federation = flwr["federations"][flwr["federations"]["default"]]
    return AppSpec(
        name=root.name,
        root=root,
        serverapp=components["serverapp"],
        clientapp=components["clientapp"],
        num_supernodes=int(federation["options"]["num-supernodes"]),
    )


@contextlib.contextmanager
def importable(root: Path) -> Iterator[None]:
    """`root` on sys.path for the block; afterwards sys.path and sys.modules as before.

    Modules imported from `root` are dropped again, so the next call imports the
    app afresh and two apps never share module state.
    """
    saved_path = list(sys.path)
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None) or ""
            if origin.startswith(str(root) + os.sep):
                del sys.modules[name]


def load_component(reference: str, kind: type[T]) -> T:
    """The object a component reference ("module:attribute") names, checked to be a `kind`."""
    module_name, _, attribute = reference.partition(":")
    loaded = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(loaded, kind):
        raise TypeError(f"{reference} is a {type(loaded).__name__}, not a {kind.__name__}")
    return loaded


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Run the block in `path` (the app writes results.json there), then go back."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


class _Lines(logging.Handler):
    """Keeps the text of every record logged to Flower's logger."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def flower_log() -> Iterator[list[str]]:
    """The lines Flower logs during the block (e.g. the SecAgg+ workflow's stages)."""
    handler = _Lines()
    logger = logging.getLogger("flwr")
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)


def backend_config() -> dict[str, Any]:
    """Ray settings: satisfiable on a 2-core host, loopback only, quiet."""
    return {
        "client_resources": {"num_cpus": BACKEND_CPUS, "num_gpus": 0.0},
        "init_args": {
            "num_cpus": BACKEND_CPUS,
            "num_gpus": 0,
            "include_dashboard": False,
            "_node_ip_address": "127.0.0.1",
        },
    }


def simulate(spec: AppSpec, nodes: int) -> None:
    """One run of the app under Flower's simulation engine, in the working directory."""
    from flwr.app import Context, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.common.config import get_fused_config_from_dir
    from flwr.serverapp import ServerApp
    from flwr.simulation.run_simulation import _run_simulation
    from flwr.supercore.telemetry import EventType

    handlers = _signal_handlers()
    with importable(spec.root):
        server_app = load_component(spec.serverapp, ServerApp)
        client_app = load_component(spec.clientapp, ClientApp)
        run_config = get_fused_config_from_dir(spec.root, {})
        context = Context(
            run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config=run_config
        )
        try:
            _run_simulation(
                num_supernodes=nodes,
                exit_event=EventType.PYTHON_API_RUN_SIMULATION_LEAVE,
                client_app=client_app,
                server_app=server_app,
                backend_config=backend_config(),  # type: ignore[arg-type]
                server_app_context=context,
                app_dir=str(spec.root),
                is_app=True,
            )
        finally:
            _stop_ray()
            _restore(handlers)


def _stop_ray() -> None:
    """Flower shuts Ray down when its loop ends; this covers a run that failed first."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _signal_handlers() -> dict[int, Any]:
    return {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}


def _restore(handlers: dict[int, Any]) -> None:
    """`ray.init` and Flower install SIGTERM/SIGINT handlers that outlive the run; a
    reference run inside pytest must leave the process's handlers as it found them."""
    for number, handler in handlers.items():
        signal.signal(number, handler)


def _by_round(section: dict[str, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(r): metrics for r, metrics in section.items()}


def run_reference(
    app: str, nodes: int | None = None, workdir: Path | None = None
) -> dict[str, Any]:
    """Run `app` under plain Flower with `nodes` nodes (default: its pyproject's) and
    return what it produced: {"app", "nodes", "num-server-rounds", "seconds",
    "train"/"evaluate"/"central": {round: metrics}, "extra": {...}, "log": [lines]}.
    """
    from flwr.common.config import get_fused_config_from_dir

    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    spec = read_app(app)
    count = nodes or spec.num_supernodes
    folder = workdir or Path(tempfile.mkdtemp(prefix=f"conformance-{spec.name}-"))
    start = time.perf_counter()
    with working_directory(folder), flower_log() as lines:
        simulate(spec, count)
    seconds = time.perf_counter() - start
    produced = json.loads((folder / "results.json").read_text())
    rounds = get_fused_config_from_dir(spec.root, {})["num-server-rounds"]
    return {
        "app": spec.name,
        "nodes": count,
        "num-server-rounds": int(rounds),  # type: ignore[arg-type]
        "seconds": round(seconds, 2),
        **{section: _by_round(produced.get(section, {})) for section in SECTIONS},
        "extra": produced.get("extra", {}),
        "log": lines,
    }


def shared_reference(app: str, attempt: int, folder: Path) -> dict[str, Any]:
    """run_reference(app)'s `attempt`-th run, made once in `folder` and read back by any
    later caller there, in this process or another (a lock per run): the test session's
    xdist workers share one folder (tests/apps/conftest.py), so the two conformance
    modules share each app's reference run instead of making it once each."""
    from filelock import FileLock

    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{app}-{attempt}.json"
    with FileLock(f"{saved}.lock"):
        if not saved.exists():
            workdir = folder / f"{app}-{attempt}"
            workdir.mkdir(exist_ok=True)  # a run that failed before may have made it
            result = run_reference(app, workdir=workdir)
            saved.write_text(json.dumps(result))
        result = json.loads(saved.read_text())
    # JSON keeps the sections' round numbers as strings: back to run_reference's ints.
    return {**result, **{section: _by_round(result[section]) for section in SECTIONS}}


def main(argv: list[str]) -> int:
    """`<app> [nodes=N]`: print the app's reference metrics (without Flower's log) as JSON."""
    if not argv or argv[0] not in APPS:
        print(f"usage: python -m tests.apps.conformance.reference {{{','.join(APPS)}}} [nodes=N]")
        return 2
    nodes = None
    for arg in argv[1:]:
        key, _, value = arg.partition("=")
        if key != "nodes" or not value.isdigit():
            print(f"unknown argument {arg!r} (expected nodes=N)")
            return 2
        nodes = int(value)
    result = run_reference(argv[0], nodes)
    result.pop("log")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
