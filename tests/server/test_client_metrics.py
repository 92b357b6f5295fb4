"""Every metric a device's train reply carries reaches client_metrics.csv, whatever its status."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace

import pytest
from flwr.app import Message, MetricRecord, RecordDict

from fedbench.report.server_rounds import ServerRoundsWriter
from fedbench.report.writer import CLIENT_METRICS_CSV, RunWriter
from fedbench.server.close import Deadline
from fedbench.server.hooks import RecordHook
from fedbench.server.run import Availability, LoopState
from tests.server.fakes import Device, build_loop, device, spec, weights


def _with_metrics(inner: Device, **metrics: float) -> Device:
    """`inner`, whose reply's metrics carry `metrics` too (what an app measures besides)."""

    def reply(msg: Message) -> RecordDict | None:
        content = inner(msg)
        if content is not None:
            merged = {**dict(content["metrics"]), **metrics}
            content["metrics"] = MetricRecord(merged)  # type: ignore[arg-type]
        return content

    return reply


@pytest.mark.parametrize("per_call", [1, 2])  # one device a call, or two in one (grouped)
def test_each_devices_train_metrics_reach_the_file(tmp_path: Path, per_call: int) -> None:
    writer = RunWriter(tmp_path, {"name": "m"})
    hook = RecordHook()
    run = SimpleNamespace(
        writer=writer,
        server_rounds=ServerRoundsWriter(tmp_path),
        wall_start=0.0,
        availability=Availability(),
    )
    hook.on_run_begin(run)  # type: ignore[arg-type]
    devices = {
        "a": _with_metrics(device(1.0), train_acc=0.8),
        "b": _with_metrics(device(1.0, status="failed"), train_acc=0.1),  # its report: failed
        "c": _with_metrics(device(9.0), train_acc=0.6),  # replies after the deadline
        "d": _with_metrics(device(1.0, report=False), train_acc=0.7),  # a stock ClientApp
    }
    loop, _, _ = build_loop(
        devices, k=4, per_call=per_call, hooks=[hook], close=Deadline(deadline_s=5.0)
    )
    loop.run([spec(1)], LoopState(0, 0.0, 0, weights()))
    with (tmp_path / CLIENT_METRICS_CSV).open(newline="") as f:
        rows = list(csv.DictReader(f))
    kept = {(r["device"], r["key"]): r["value"] for r in rows}
    for name, acc in (("a", "0.8"), ("b", "0.1"), ("c", "0.6"), ("d", "0.7")):
        assert kept[(name, "train_acc")] == acc
        assert kept[(name, "train_loss")] == "0.5" and kept[(name, "num-examples")] == "10"
    assert {(r["round"], r["day"], r["message"], r["record"]) for r in rows} == {
        ("1", "1", "train", "metrics")
    }
    assert [r["device"] for r in rows] == sorted(r["device"] for r in rows)  # device order
