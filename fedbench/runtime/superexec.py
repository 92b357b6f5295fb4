"""`python -m fedbench.runtime.superexec ARGS`: Flower's SuperExec, every task token off the
command line.

A SuperExec takes a task and its token from a Runtime API - the SuperLink's
for the ServerApp, a SuperNode's for its ClientApps - and starts the process
that runs it. Flower 1.42's `flower-superexec` starts it with `--token
<token>` (its subprocess executor): every account on the host reads the
token in `ps`, and with it could pull the task's inputs (the model) or push
results in the app's place. `flwr-serverapp` and `flwr-clientapp` also take
`--token-file`, but only Flower's Kubernetes executor uses it, and
`flower-superexec` has no way to plug in another executor.

So this runs Flower's SuperExec loop - its Runtime API client, its SuperExec
authentication (the run's secret signs each AcquireTask), its `AutoExecPlugin`
- with an executor of fedbench's (Flower's `Executor` protocol, handed to the
plugin as Flower's own code hands it its executors): each process gets its
token in an anonymous in-memory file (memfd) it inherits, named on its
command line as `--token-file /proc/self/fd/N`. Nothing is written to disk,
and only the process itself and the run's own account (through
`/proc/PID/fd`, like its memory) can read it. Arguments as `flower-superexec`:

    python -m fedbench.runtime.superexec --runtime-api-address 127.0.0.1:PORT \
        (--insecure | --root-certificates CA) --superexec-auth-secret-file F \
        [--parent-pid PID]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from collections.abc import Sequence
from logging import ERROR, INFO
from pathlib import Path

from flwr.supercore.constant import (
    TASK_TYPE_TO_APPIO_API_ADDRESS_ARG,
    TASK_TYPE_TO_COMMAND,
    TaskType,
)
from flwr.supercore.superexec.executor import ExecutionSpec, LaunchResult

from fedbench.runtime import entry

# The task types a fedbench deployment runs; a SuperExec asks only for these.
TASK_TYPES = frozenset({TaskType.SERVER_APP, TaskType.CLIENT_APP})
POLL_S = 1.0  # flower-superexec's default between two AcquireTask calls
# The one Runtime API call the SuperExec secret signs (as flower-superexec signs it).
AUTH_METHODS = frozenset({"/flwr.proto.Runtime/AcquireTask"})
TOKEN_FD_NAME = "flwr-task-token"


def token_file(token: str) -> int:
    """A close-on-exec memfd holding `token`: passed to one child by `pass_fds`, then closed."""
    fd = os.memfd_create(TOKEN_FD_NAME, os.MFD_CLOEXEC)
    os.write(fd, token.encode())
    return fd


def command(name: str) -> list[str]:
    """The command line of Flower's `name`, run by this interpreter (runtime/entry.py)."""
    return entry.argv(name)


def task_argv(spec: ExecutionSpec, fd: int) -> list[str]:
    """What Flower's subprocess executor runs, with `--token-file` in place of `--token`."""
    argv = [
        *command(TASK_TYPE_TO_COMMAND[spec.task_type]),
        TASK_TYPE_TO_APPIO_API_ADDRESS_ARG[spec.task_type],
        spec.runtime_api_address,
        "--token-file",
        f"/proc/self/fd/{fd}",
    ]
    if spec.insecure:
        argv.append("--insecure")
    elif spec.root_certificates_path is not None:
        argv += ["--root-certificates", spec.root_certificates_path]
    if spec.parent_pid is not None:
        argv += ["--parent-pid", str(spec.parent_pid)]
    if spec.runtime_dependency_install:
        argv.append("--allow-runtime-dependency-installation")
    return argv


class TokenFileExecutor:
    """Flower's `Executor` protocol: local subprocesses, each token in an inherited memfd."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []

    def get_eligible_capacity(
        self,
        supported_task_types: set[TaskType],
        *,
        insecure: bool = False,
        root_certificates_path: str | None = None,
    ) -> tuple[set[TaskType], set[str]]:
        del insecure, root_certificates_path
        return set(supported_task_types) & TASK_TYPES, set()

    def wait_for_capacity(
        self,
        task_type: TaskType | None = None,
        *,
        fab_hash: str | None = None,
        insecure: bool = False,
        root_certificates_path: str | None = None,
    ) -> None:
        del task_type, fab_hash, insecure, root_certificates_path  # no capacity gate

    def launch(self, spec: ExecutionSpec) -> LaunchResult:
        if spec.task_type not in TASK_TYPES:
            return LaunchResult.failed(f"fedbench runs no {spec.task_type} task")
        fd = token_file(spec.token)
        argv = task_argv(spec, fd)
        # The ServerApp's output is dropped as Flower drops it (the run streams its log).
        out = subprocess.DEVNULL if spec.suppress_output else None
        try:
            self.running.append(subprocess.Popen(argv, pass_fds=(fd,), stdout=out, stderr=out))
        except OSError as exc:
            return LaunchResult.failed(f"{argv[0]}: {exc.strerror}")
        finally:
            os.close(fd)  # the child holds its own copy
        return LaunchResult.accepted()

    def reconcile(self) -> None:
        """Collect the tasks that ended (no zombies between two polls)."""
        self.running = [p for p in self.running if p.poll() is None]

    def close(self) -> None:
        self.reconcile()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fedbench.runtime.superexec")
    p.add_argument("--runtime-api-address", required=True)
    tls = p.add_mutually_exclusive_group(required=True)
    tls.add_argument("--insecure", action="store_true")
    tls.add_argument("--root-certificates", metavar="CA")
    p.add_argument("--superexec-auth-secret-file", type=Path, required=True)
    p.add_argument("--parent-pid", type=int)
    return p


def serve(args: argparse.Namespace) -> None:
    """Flower's SuperExec loop (run_superexec) around `TokenFileExecutor`."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore import log
    from flwr.supercore.app_utils import start_parent_process_monitor
    from flwr.supercore.auth import load_superexec_auth_secret
    from flwr.supercore.exit import register_signal_handlers
    from flwr.supercore.interceptors import (
        RuntimeVersionHttpInterceptor,
        SuperExecAuthHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.superexec.plugin import AutoExecPlugin
    from flwr.supercore.telemetry import EventType
    from flwr.supercore.tls import validate_and_resolve_root_certificates

    try:
        secret = load_superexec_auth_secret(secret_file=str(args.superexec_auth_secret_file))
    except ValueError as exc:
        raise SystemExit(f"fedbench superexec: {exc}") from None
    if secret is None:  # the flag is required: only an unset file gives None
        raise SystemExit("fedbench superexec: --superexec-auth-secret-file is required")
    if args.parent_pid is not None:
        start_parent_process_monitor(args.parent_pid)
    executor = TokenFileExecutor()
    client = RuntimeHttpClient.from_server_address(
        server_address=args.runtime_api_address,
        insecure=args.insecure,
        root_certificates=validate_and_resolve_root_certificates(
            args.root_certificates, args.insecure
        ),
        interceptors=[
            RuntimeVersionHttpInterceptor(component_name="SuperExec"),
            SuperExecAuthHttpInterceptor(master_secret=secret, protected_methods=AUTH_METHODS),
        ],
        retry_invoker=make_simple_http_retry_invoker(),
    )
    register_signal_handlers(
        event_type=EventType.RUN_SUPEREXEC_LEAVE,
        exit_message="SuperExec terminated gracefully.",
        exit_handlers=[client.close, executor.close],
    )
    plugin = AutoExecPlugin(
        runtime_api_address=args.runtime_api_address,
        insecure=args.insecure,
        root_certificates_path=args.root_certificates,
        runtime_dependency_install=False,  # fedbench is installed: never `uv sync` an app
        executor=executor,
    )
    log(INFO, "Starting fedbench's SuperExec (task tokens by file descriptor)")
    while True:
        executor.reconcile()
        types, fabs = executor.get_eligible_capacity(set(plugin.supported_task_types))
        got = client.AcquireTask(
            AcquireTaskRequest(supported_task_types=types, agentapp_fab_hashes=fabs)
        )
        if got.HasField("task") and got.token:
            result = plugin.launch_task(token=got.token, task=got.task)
            if result.message:
                log(ERROR, "task %d not started: %s", got.task.task_id, result.message)
        time.sleep(POLL_S)


def main(argv: Sequence[str] | None = None) -> None:
    from flwr.supercore.utils import disable_process_dumping

    disable_process_dumping(strict=False)  # as flower-superexec: no core dump, no ptrace
    serve(_parser().parse_args(argv))


if __name__ == "__main__":
    main()
