"""Many command lines, each in a process of its own, for the price of one interpreter start.

`python -m fedbench ...` spends seconds importing torch, Flower and Hydra
before it reads its first argument. `run_commands` starts one Python that
imports them once, then forks a child per command: the child runs the
entry module exactly as `python -m <module> <args>` would (runpy, with
`sys.argv` set), in its own working folder and environment, with stdout and
stderr going to files; its exit code is the command's. So each command is a
real process - its own exit, no state shared with the next - and a
catalogue of forty refusals costs one start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# What the parent imports before forking: everything the entry points load.
PRELOAD = (  # what the entry points load, not the entry modules (runpy runs those afresh)
    "torch",
    "flwr.app",
    "flwr.serverapp",
    "hydra",
    "cryptography.x509",
    "fedbench.cli.gate",
    "fedbench.experiment.overrides",
    "fedbench.preflight",
    "fedbench.fleet",
    "fedbench.analyze.runs",
)


@dataclass(frozen=True)
class Command:
    module: str  # run as `python -m <module>`
    args: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...] = ()

    @property
    def shown(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        return f"{env + ' ' if env else ''}python -m {self.module} {' '.join(self.args)}".strip()


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str
    wall_s: float = 0.0  # the command's own time, fork to exit


def run_commands(
    commands: list[Command], timeout_s: float = 120.0, preload: tuple[str, ...] = ()
) -> list[Result]:
    """Each command's exit code and output (see the module docstring); `preload` names more
    modules for the parent to import before it forks (what the commands all import)."""
    jobs = [
        {"module": c.module, "args": list(c.args), "cwd": c.cwd, "env": dict(c.env)}
        for c in commands
    ]
    request = json.dumps([*jobs, {"timeout_s": timeout_s, "preload": list(preload)}])
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    total = timeout_s * len(commands) + 120
    proc = subprocess.run(
        [sys.executable, "-m", "tests.cli_runner"],
        input=request,
        capture_output=True,
        text=True,
        timeout=total,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tests.cli_runner failed ({proc.returncode}): {proc.stderr[-3000:]}")
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return [Result(r["code"], r["stdout"], r["stderr"], r.get("wall_s", 0.0)) for r in rows]


def _child(job: dict, out: Path, err: Path) -> None:  # pragma: no cover - runs in the fork
    import runpy

    code = 0
    try:
        fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process ends with it
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        os.chdir(job["cwd"])
        os.environ.update(job["env"])
        sys.argv = [job["module"], *job["args"]]
        # As `python -m`: the entry module runs once, as __main__ (the parent may have imported
        # it as a dependency of another entry point).
        sys.modules.pop(job["module"], None)
        sys.modules.pop(f"{job['module']}.__main__", None)
        runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - a traceback is what the test must see
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve() -> None:  # pragma: no cover - the subprocess's main
    import importlib
    import signal
    import tempfile
    import time

    jobs = json.loads(sys.stdin.read())
    options = jobs.pop()
    timeout_s = float(options["timeout_s"])
    for name in (*PRELOAD, *options.get("preload", ())):
        try:
            importlib.import_module(name)
        except ImportError:  # an older checkout without it: the child imports what it needs
            continue
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, job in enumerate(jobs):
            out, err = Path(tmp) / f"{i}.out", Path(tmp) / f"{i}.err"
            sys.stdout.flush()
            sys.stderr.flush()
            started = time.monotonic()
            pid = os.fork()
            if pid == 0:
                _child(job, out, err)
            end = time.monotonic() + timeout_s
            status = None
            while status is None:
                done, raw = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = raw
                elif time.monotonic() > end:
                    os.kill(pid, signal.SIGKILL)
                    status = os.waitpid(pid, 0)[1]
                else:
                    time.sleep(0.05)
            code = os.waitstatus_to_exitcode(status)
            results.append(
                {
                    "code": code,
                    "stdout": out.read_text(errors="replace"),
                    "stderr": err.read_text(errors="replace"),
                    "wall_s": round(time.monotonic() - started, 3),
                }
            )
    print(json.dumps(results))


if __name__ == "__main__":
    _serve()
