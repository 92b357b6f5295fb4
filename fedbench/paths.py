"""Where fedbench finds its YAMLs and keeps its caches.

The config groups (`fedbench/conf/`) and the device profiles
(`fedbench/device_profiles/`) are folders of the package itself, so they are
read from beside the fedbench code that runs: a checkout reads its own, a
wheel its own, and a second checkout sharing an environment with the first
never reads the first's. `where_line` names them as a run starts, and
summary.json's provenance keeps them.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedbench import __version__

_PACKAGE = Path(__file__).resolve().parent


def package_dir() -> Path:
    """The folder of the fedbench package that is running."""
    return _PACKAGE


def conf_dir() -> Path:
    """The Hydra config groups (`python -m fedbench group=option`)."""
    return _PACKAGE / "conf"


def profiles_dir() -> Path:
    """The named device profiles (`fleet.devices[].profile=<name>`)."""
    return _PACKAGE / "device_profiles"


def where_line() -> str:
    """One line naming the fedbench that runs and the folders it reads its YAMLs from."""
    return (
        f"fedbench {__version__} from {_PACKAGE}: configs {conf_dir()}, profiles {profiles_dir()}"
    )


def cache_dir() -> Path:
    """Cache for pretrained models and workload measurements.

    `FEDBENCH_CACHE` overrides it (tests point it at a temporary folder).
    """
    root = os.environ.get("FEDBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fedbench"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
