"""Where a result came from: code version, software, host, command line, time.

`provenance()` is written into summary.json's `provenance` (RunWriter), so a
run folder copied to a paper's artefact still says which fedbench commit and
which torch/Flower/Ray made it, on what CPU, from which command.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from fedbench import __version__
from fedbench.core.redact import redact_argv, redact_text, remember_environment
from fedbench.paths import conf_dir, package_dir, profiles_dir

# Set by `python -m fedbench` (fedbench/__main__.py) so that processes it starts for the
# run (the deployment's ServerApp) record the user's command, not their own.
COMMAND_ENV = "FEDBENCH_COMMAND"
NOT_GIT = "not a git checkout"
# Set by `resume=` (fedbench.resume.check_code): the code (commits, or `fedbench <version>`
# outside git) that wrote the folder's earlier rounds where it is not this code.
EARLIER_CODE_ENV = "FEDBENCH_EARLIER_CODE"
PACKAGES = ("torch", "flwr", "ray", "numpy", "hydra-core")


def now() -> str:
    """The current time, ISO 8601 in UTC to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def version_of(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_commit(where: Path | None = None) -> tuple[str, bool | None]:
    """(commit, has uncommitted changes) of the checkout fedbench runs from.

    The checkout is the one holding the fedbench package - not the current
    directory, which may be any folder - and an installed copy has none.
    """
    folder = where or Path(__file__).resolve().parents[2]
    try:
        # An installed copy inside some repository (a venv in a checkout) is not that
        # repository's code: the package must sit at the checkout's top level.
        if Path(_git(folder, "rev-parse", "--show-toplevel")).resolve() != folder.resolve():
            return NOT_GIT, None
        commit = _git(folder, "rev-parse", "HEAD")
        dirty = bool(_git(folder, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return NOT_GIT, None
    return commit, dirty


# What `code_digest` hashes: the files that decide what a run does (code, configs,
# profiles, bundled data), not caches.
CODE_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".gz", ".md")
DIGEST_PREFIX = "sha256:"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 of the running fedbench's files and the `strategies` package beside it.

    Every path (relative, sorted) and its bytes, so a renamed, added, edited or
    removed file changes it. It tells code apart where a commit cannot: an installed
    wheel (no git), and a checkout with uncommitted edits. About 5 MB, hashed once a
    process.
    """
    spec = importlib.util.find_spec("strategies")  # found, not imported
    tops = [package_dir()]
    if spec is not None and spec.origin is not None:
        tops.append(Path(spec.origin).resolve().parent)
    h = hashlib.sha256()
    for top in tops:
        files = sorted(
            p
            for p in top.rglob("*")
            if p.is_file() and p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts
        )
        for path in files:
            h.update(f"{top.name}/{path.relative_to(top).as_posix()}\0".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return DIGEST_PREFIX + h.hexdigest()


def is_commit(value: object) -> bool:
    """A full git commit id (SHA-1, or SHA-256 in a repository of that format)."""
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", value) is not None


def earlier_code() -> list[str]:
    """The code of a resumed folder's earlier rounds, where not this code (`resume=` says)."""
    try:
        listed = json.loads(os.environ.get(EARLIER_CODE_ENV) or "[]")
    except ValueError:
        return []
    return [c for c in listed if isinstance(c, str)] if isinstance(listed, list) else []


def _git(folder: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=True
    )
    return out.stdout.strip()


def cpu_model() -> str:
    """The CPU's marketing name (/proc/cpuinfo on Linux, else what platform says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that made the run, its secrets masked (`flwr-serverapp --token ***`)."""
    if argv is not None:
        return shlex.join(redact_argv(argv))
    if os.environ.get(COMMAND_ENV):
        return redact_text(os.environ[COMMAND_ENV])
    return shlex.join(redact_argv(getattr(sys, "orig_argv", sys.argv)))


def provenance(argv: Sequence[str] | None = None, accelerator: str = "auto") -> dict[str, object]:
    """What made this run (see docs/results.md for each key); `argv`: the command line,
    `accelerator`: the runtime's setting (where devices trained)."""
    import psutil

    from fedbench.core.numerics import environment  # torch: not at import (the CLI's --help)
    from fedbench.train.accelerator import host_record

    commit, dirty = git_commit()
    earlier = earlier_code()
    remember_environment()  # FLWR_TOKEN=... in the environment: masked wherever it shows
    return {
        # The running package's own version and folders, not the installed metadata's:
        # a second checkout sharing an environment runs (and reads) its own files.
        "fedbench_version": __version__,
        "fedbench_package": str(package_dir()),
        "conf_dir": str(conf_dir()),
        "profiles_dir": str(profiles_dir()),
        "git_commit": commit,
        "git_dirty": dirty,
        "code_digest": code_digest(),
        # A folder resumed with resume_any_commit=true: what wrote its earlier rounds.
        **({"earlier_code": earlier} if earlier else {}),
        "python": platform.python_version(),
        **{name.replace("-", "_"): version_of(name) for name in PACKAGES},
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        **host_record(accelerator),
        # torch build, ISA level, the variables that pick kernels: what sums in its own
        # order (fedbench.core.numerics); the run's thread counts and its initial model's
        # hash are added by the server (fedbench.server.app).
        "numerics": environment(),
        "command": command_line(argv),
        "cwd": os.getcwd(),
        "start_time": now(),
        "end_time": None,
    }
