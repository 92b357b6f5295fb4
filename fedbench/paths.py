"""Where fedbench finds its YAMLs and keeps its caches.

`conf/` and `device_profiles/` sit at the repository root and are installed
as the packages `fedbench.conf` and `fedbench.device_profiles`
(pyproject.toml), so the same lookups work from a checkout and an install.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def conf_dir() -> Path:
    return Path(str(resources.files("fedbench.conf")))


def profiles_dir() -> Path:
    return Path(str(resources.files("fedbench.device_profiles")))


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
