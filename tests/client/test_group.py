"""Several devices in one worker call: each device's round is the one it would have had alone."""

from __future__ import annotations

import math

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

from fedbench.core.records import from_record
from fedbench.experiment.codec import to_json
from fedbench.experiment.fleet import expand_fleet
from fedbench.models import build_model
from fedbench.protocol import REPORT, TASK, TrainTask, tasks_record, ungroup_all
from tests.bad_inputs import _typed
from tests.helpers import client_report, run_client, task_identity, train_message

OVERRIDES = ["experiment=smoke", "fleet=mixed8", "scenario.new_samples_per_day=32"]
EXPERIMENT = _typed(OVERRIDES)


def _group(devices: list[int], arrays: ArrayRecord, experiment: object = EXPERIMENT) -> Message:
    task_identity()
    fleet = expand_fleet(experiment.fleet)  # type: ignore[attr-defined]
    tasks = [TrainTask(1, 1, i, fleet[i].name, 7200.0, 0, None) for i in devices]
    content = RecordDict(
        {
            "arrays": arrays,
            "config": ConfigRecord(),
            TASK: tasks_record(tasks, to_json(experiment)),  # type: ignore[arg-type]
        }
    )
    return Message(content, dst_node_id=1, message_type=MessageType.TRAIN)


# Within this of the CPU's figures on a GPU (other kernels, other summation orders).
GPU_TOLERANCE = 1e-3


@pytest.mark.parametrize("accelerator", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("batched", [False, True])
def test_a_call_for_three_devices_gives_each_its_own_round(
    batched: bool, accelerator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batched or not, on the CPU or a GPU: each device's emulated columns are exactly
    those it has trained alone on the CPU, its loss and weights within tolerance."""
    monkeypatch.setattr("fedbench.client.handler.batching_pays", lambda *a: batched)
    tolerance = 1e-5 if accelerator == "cpu" else GPU_TOLERANCE
    torch.manual_seed(0)
    model, _ = build_model("small_cnn")
    arrays = ArrayRecord(model.state_dict())
    on = _typed([*OVERRIDES, f"runtime.accelerator={accelerator}"])
    reply = run_client(_group([0, 1, 2], arrays, on))
    for i in (0, 1, 2):
        mine = ungroup_all(reply.content)[i]
        report = from_record(mine.config_records[REPORT])
        alone_reply = run_client(train_message(EXPERIMENT, i, arrays))  # type: ignore[arg-type]
        alone = client_report(alone_reply)
        assert report.device == alone.device and report.status == "ok"
        assert report.plan == (f"{alone.plan} vmap3" if batched else alone.plan)
        for key in ("latency_s", "energy_j", "peak_mem_mb", "num_examples", "temp_c_end"):
            assert getattr(report, key) == getattr(alone, key), key
        assert math.isclose(report.train_loss, alone.train_loss, abs_tol=tolerance)
        ours, theirs = mine.array_records["arrays"], alone_reply.content.array_records["arrays"]
        for key in theirs:
            assert torch.allclose(
                torch.from_numpy(ours[key].numpy()).double(),
                torch.from_numpy(theirs[key].numpy()).double(),
                atol=tolerance,
            ), key


def test_a_device_its_batched_group_leaves_out_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from fedbench.client import handler

    monkeypatch.setattr("fedbench.client.handler.batching_pays", lambda *a: True)
    plain = handler.Prepared.batchable

    # Device 1's memory plan cannot be batched (as a micro-batched or checkpointed one).
    def batchable(self: handler.Prepared, model: torch.nn.Module) -> bool:
        return self.seat.device.index != 1 and plain(self, model)

    monkeypatch.setattr(handler.Prepared, "batchable", batchable)
    torch.manual_seed(0)
    arrays = ArrayRecord(build_model("small_cnn")[0].state_dict())
    reply = run_client(_group([0, 1, 2], arrays))
    replies = ungroup_all(reply.content)
    plans = [from_record(replies[i].config_records[REPORT]).plan for i in (0, 1, 2)]
    assert plans[0].endswith(" vmap2") and plans[2].endswith(" vmap2"), plans
    assert plans[1].endswith(" alone:plan"), plans
    # The note belongs to that group: the device's next call of its own has none.
    alone = client_report(run_client(train_message(EXPERIMENT, 1, arrays)))  # type: ignore[arg-type]
    assert "alone" not in alone.plan and "vmap" not in alone.plan
