"""runtime.enforce_caps: each capped call in a process of its own, under the device's limits.

The scenarios run in a fresh Python (a subprocess), as a worker would: whether
oneDNN and GNU OpenMP are already initialised in the test runner's process
depends on the tests before, and both decide what a failed call leaves behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedbench.client.isolated import CallFailed, Limits, out_of_memory
from fedbench.paths import profiles_dir
from fedbench.runtime.limits import memory_groups

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")

ROOT = Path(__file__).parents[2]


def _python(code: str, timeout: float = 240) -> Any:
    """Run `code` in a fresh Python from the repository root; the JSON it prints last."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _tiny_profile(folder: Path, budget_mb: int) -> Path:
    data = yaml.safe_load((profiles_dir() / "rpi3bplus.yaml").read_text())
    data["name"] = "rpi3bplus_tiny"
    data["memory"]["train_budget_mb"] = budget_mb
    data["sources"]["memory.train_budget_mb"] = f"test: budget cut to {budget_mb} MB"
    path = folder / "rpi3bplus_tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# A user's ClientApp under the device mod: its first operation is a convolution (oneDNN
# creates its primitive then), and it reports the threads and CPUs it ran with.
_APP = """
import json, os, sys, torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from fedbench.client.app import seat_app
from tests.bad_inputs import _typed
from tests.helpers import client_report, train_message

def net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 10),
    )

app = ClientApp()

@app.train()
def train(msg, context):
    model = net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model(torch.randn(2, 3, 8, 8))
    x, y = torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    seen = MetricRecord({
        "num-examples": 256,
        "threads": torch.get_num_threads(),
        "cpus": len(os.sched_getaffinity(0)),
    })
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "seen": seen}),
                   reply_to=msg)

def round_of(overrides, devices):
    experiment = _typed(overrides + ["strategy.clients_per_round=1"])
    out = []
    for index in devices:
        msg = train_message(experiment, index, ArrayRecord(net().state_dict()))
        ctx = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
        reply = seat_app(app)(msg, ctx)
        r = client_report(reply)
        seen = dict(reply.content.metric_records.get("seen", {}))
        out.append({"device": r.device, "status": r.status, "reason": r.reason, **seen})
    return out
"""


def test_an_out_of_memory_call_leaves_its_worker_healthy_for_the_next_device(
    tmp_path: Path,
) -> None:
    """The issue's failure: after one device ran out, every later one was `failed`."""
    tiny = _tiny_profile(tmp_path, 16)
    rows = _python(
        _APP
        + f"""
fleet = "fleet.devices=[{{profile:'{tiny}',count:2}},{{profile:rpi4,count:1}}]"
rows = round_of([fleet, "runtime.enforce_caps=true"], [0, 1, 2])
print(json.dumps(rows))
"""
    )
    small, again, roomy = rows
    for row in (small, again):  # each time the cap, not the emulator after the fact
        assert row["status"] == "oom", row
        assert "cgroup" in row["reason"] or "RLIMIT_AS" in row["reason"], row
    assert roomy["status"] == "ok", roomy  # the worker serves the next device normally
    assert roomy["reason"] == ""


def test_a_capped_call_runs_with_the_profiles_threads_on_as_many_cpus() -> None:
    host = len(os.sched_getaffinity(0))
    if host < 2:
        pytest.skip("needs 2 CPUs to tell the profile's threads from one")
    rows = _python(
        _APP
        + f"""
fleet = "fleet.devices=[{{profile:rpi4,count:1}},{{profile:honor8,count:1}}]"
capped = ["runtime.enforce_caps=true", "runtime.client_cpus={host}"]
rows = round_of([fleet, *capped], [0, 1])  # 4 framework threads each: all {host} CPUs
rows += round_of([fleet, *capped, "+fleet.knobs.cores=1"], [0])  # one training thread
rows += round_of([fleet, "runtime.client_cpus={host}"], [0])  # not capped: all CPUs
print(json.dumps(rows + [{{"parent_threads": torch.get_num_threads(),
                          "parent_cpus": len(os.sched_getaffinity(0))}}]))
"""
    )
    *calls, parent = rows
    want = min(4, host)
    assert [(r["status"], r["threads"], r["cpus"]) for r in calls] == [
        ("ok", want, want),
        ("ok", want, want),
        ("ok", 1, 1),
        ("ok", host, host),
    ]
    assert parent["parent_cpus"] == host  # the worker's own affinity is never narrowed


# --- the isolation itself, on both memory mechanisms ---

_ISOLATED = """
import json, os, resource, signal, torch
from fedbench.client.isolated import CallFailed, Limits, run_isolated
from fedbench.runtime.limits import memory_groups

def conv_step(n):
    c = torch.nn.Conv2d
    net = torch.nn.Sequential(c(3, 32, 3), torch.nn.ReLU(), c(32, 32, 3))
    net(torch.randn(n, 3, 64, 64)).sum().backward()
    return n

def outcome(call, limits):
    try:
        return {"value": run_isolated(call, limits)}
    except CallFailed as exc:
        return {"oom": exc.out_of_memory, "reason": exc.reason}

groups = memory_groups() if MECHANISM == "cgroup" else None
cap = lambda mb: Limits(threads=1, cpus=(), memory_mb=mb, groups=groups)
before = (torch.get_num_threads(), sorted(os.sched_getaffinity(0)),
          resource.getrlimit(resource.RLIMIT_AS))
out = {
    "fits": outcome(lambda: conv_step(2), cap(256)),
    "over": outcome(lambda: conv_step(64), cap(64)),  # ~150 MB of activations and gradients
    "after": outcome(lambda: conv_step(8), cap(256)),
    "raised": outcome(lambda: 1 / 0, cap(256)),
    "crashed": outcome(lambda: os.kill(os.getpid(), signal.SIGSEGV), cap(256)),
    "unpicklable": outcome(lambda: (lambda: 0), cap(256)),
}
out["here"] = conv_step(8)  # this process trains after all of it
after = (torch.get_num_threads(), sorted(os.sched_getaffinity(0)),
         resource.getrlimit(resource.RLIMIT_AS))
out["unchanged"] = after[1:] == before[1:]
out["parent_threads"] = after[0]
print(json.dumps(out))
"""


@pytest.mark.parametrize("mechanism", ["cgroup", "rlimit"])
def test_each_ending_of_an_isolated_call_is_told_apart(mechanism: str) -> None:
    if mechanism == "cgroup" and memory_groups() is None:
        pytest.skip("no writable cgroup (v2 or v1 memory) here: RLIMIT_AS is the mechanism")
    out = _python(f"MECHANISM = {mechanism!r}\n" + _ISOLATED)
    assert out["fits"] == {"value": 2}
    assert out["over"]["oom"] is True, out["over"]
    cap = "cgroup v" if mechanism == "cgroup" else "RLIMIT_AS 64 MB"
    assert cap in out["over"]["reason"], out["over"]
    assert out["after"] == {"value": 8}  # the next call is unaffected
    assert out["raised"] == {"oom": False, "reason": "ZeroDivisionError: division by zero"}
    assert out["crashed"]["oom"] is False
    assert "killed by SIGSEGV before it replied" in out["crashed"]["reason"]
    assert out["unpicklable"]["oom"] is False
    assert "cannot be sent back" in out["unpicklable"]["reason"]
    assert out["here"] == 8 and out["unchanged"] and out["parent_threads"] == 1


def test_a_call_replies_before_its_worker_imports_what_the_call_imported(tmp_path: Path) -> None:
    """The worker imports a child's modules before its next fork, not before the reply.

    A deployment's `flwr-clientapp` serves one message and exits: importing
    there what its child imported (the training stack, ~800 modules) only
    delayed the reply, by 6.6 s of a 13.4 s first call on a loaded 2-core host.
    """
    (tmp_path / "fedbench_probe_module.py").write_text("VALUE = 7\n")
    out = _python(
        f"""
import json, sys
sys.path.insert(0, {str(tmp_path)!r})
from fedbench.client.isolated import Limits, run_isolated

def imports():
    import fedbench_probe_module
    return fedbench_probe_module.VALUE

limits = Limits(threads=1)
value = run_isolated(imports, limits)
after_reply = "fedbench_probe_module" in sys.modules
warm = run_isolated(lambda: "fedbench_probe_module" in sys.modules, limits)
print(json.dumps([value, after_reply, warm]))
"""
    )
    value, after_reply, warm = out
    assert value == 7
    assert after_reply is False  # the reply did not wait for the import
    assert warm is True  # the next child starts with it


def test_out_of_memory_is_the_allocators_refusal_or_the_caps_verdict() -> None:
    assert out_of_memory(MemoryError())
    assert out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert not out_of_memory(RuntimeError("could not create a primitive"))
    assert out_of_memory(CallFailed("killed by the kernel at the device's memory cap", True))
    assert not out_of_memory(CallFailed("the call's process was killed by SIGSEGV", False))
    assert Limits(1, (), 360, None).describe_memory() == "RLIMIT_AS 360 MB over the call's start"
