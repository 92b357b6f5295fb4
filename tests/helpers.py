"""Run `python -m fedbench` as a user would, in a subprocess; load a benchmark script."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flwr.app import ArrayRecord, Message

    from fedbench.core.records import RoundReport
    from fedbench.experiment.schema import Experiment


def load_benchmark(name: str) -> ModuleType:
    """The script `benchmarks/<name>.py` as a module (benchmarks/ is no package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass of the script looks its module up there
    spec.loader.exec_module(module)
    return module


def run_fedbench(
    args: list[str],
    run_dir: Path | None = None,
    timeout: float = 300,
    module: str = "fedbench",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", module, *args]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", **(env or {})}
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=run_dir.parent if run_dir is not None else None,
    )


# --- Messages as fedbench's server sends them, for client tests without Flower's engine ---


def task_identity(run_id: int = 1, node_id: int = 1, task_id: int = 1) -> None:
    """Flower stamps messages with the process's task identity; a test process sets one."""
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.run_id = run_id
    TaskIdentity.node_id = node_id
    TaskIdentity.task_id = task_id


def train_message(
    experiment: Experiment,
    device_index: int,
    arrays: ArrayRecord,
    *,
    round_: int = 1,
    day: int = 1,
    now_s: float = 7200.0,
    config: dict[str, Any] | None = None,
) -> Message:
    """A train message for one fleet device: what FleetStrategy sends it."""
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict

    from fedbench.experiment.codec import to_json
    from fedbench.experiment.fleet import expand_fleet
    from fedbench.protocol import TASK, TrainTask, tasks_record

    task_identity()
    device = expand_fleet(experiment.fleet)[device_index]
    task = TrainTask(round_, day, device_index, device.name, now_s, round_ - 1, None)
    content = RecordDict(
        {
            "arrays": arrays,
            "config": ConfigRecord(config or {}),
            TASK: tasks_record([task], to_json(experiment)),
        }
    )
    return Message(content, dst_node_id=1, message_type=MessageType.TRAIN)


def run_client(msg: Message, node_id: int = 1) -> Message:
    """fedbench's ClientApp on one message, in this process."""
    from flwr.app import Context, RecordDict

    from fedbench.client.app import app

    context = Context(run_id=1, node_id=node_id, node_config={}, state=RecordDict(), run_config={})
    return app(msg, context)


def client_report(reply: Message) -> RoundReport:
    from fedbench.core.records import from_record
    from fedbench.protocol import REPORT

    return from_record(reply.content.config_records[REPORT])
