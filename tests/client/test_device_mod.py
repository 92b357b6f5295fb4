"""The device mod around a ClientApp fedbench did not write (tests/apps/quickstart)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict

from fedbench.client.mod import device_mod
from fedbench.protocol import REPORT, STATE, TASK
from tests.bad_inputs import _typed
from tests.helpers import client_report, run_client, task_identity, train_message

APP = Path(__file__).parents[1] / "apps" / "quickstart"
sys.path.insert(0, str(APP))  # the app's own modules, as Flower puts an app on the path

from quickstart_app.task import Net  # noqa: E402


def _round(profile: str, hidden: int) -> tuple[Message, object]:
    experiment = _typed(
        [
            f"app={APP}",
            f"fleet.devices=[{{profile:{profile},count:2}}]",
            f"+app_run_config.hidden={hidden}",
        ]
    )
    torch.manual_seed(0)
    msg = train_message(experiment, 1, ArrayRecord(Net(hidden).state_dict()), config={"lr": 0.05})  # type: ignore[arg-type]
    reply = run_client(msg)
    return reply, client_report(reply)


def test_an_apps_training_is_emulated_and_scales_with_its_model() -> None:
    small_reply, small = _round("rpi4", 32)
    _, big = _round("rpi4", 512)
    for r in (small, big):
        assert r.status == "ok" and r.kind == "emulated" and r.device == "rpi4-001"  # type: ignore[attr-defined]
        assert r.latency_s > 0 and r.energy_j > 0 and r.peak_mem_mb > 0  # type: ignore[attr-defined]
        assert r.num_examples == 718 and math.isfinite(r.train_loss)  # 80% of 1,797 // 2  # type: ignore[attr-defined]
    # A 16x wider hidden layer: more FLOPs, more bytes, more memory, on the same device.
    assert big.latency_s > 3 * small.latency_s  # type: ignore[attr-defined]
    assert big.energy_j > 3 * small.energy_j  # type: ignore[attr-defined]
    assert big.peak_mem_mb > 3 * small.peak_mem_mb  # type: ignore[attr-defined]
    assert STATE in small_reply.content.config_records  # the device's temperature, battery
    assert set(small_reply.content.array_records) == {"arrays"}


def test_the_same_app_costs_more_on_a_slower_device() -> None:
    _, pi3 = _round("rpi3bplus", 128)
    _, phone = _round("meizu_16t", 128)
    assert pi3.latency_s > phone.latency_s  # type: ignore[attr-defined]


def test_the_handler_sees_its_device_and_the_apps_run_config_not_fedbench() -> None:
    experiment = _typed([f"app={APP}", "fleet=mixed8", "+app_run_config.lr=0.2"])
    seen: dict[str, object] = {}

    def handler(msg: Message, context: Context) -> Message:
        seen.update(
            partition=context.node_config["partition-id"],
            parts=context.node_config["num-partitions"],
            accelerator=context.node_config["fedbench-accelerator"],
            lr=context.run_config["lr"],
            records=sorted(msg.content.keys()),
        )
        content = RecordDict(
            {
                "arrays": next(iter(msg.content.array_records.values())),
                "metrics": MetricRecord({"num-examples": 5}),
            }
        )
        return Message(content, reply_to=msg)

    msg = train_message(experiment, 6, ArrayRecord(Net(32).state_dict()))  # type: ignore[arg-type]
    context = Context(
        run_id=1, node_id=9, node_config={"partition-id": 0}, state=RecordDict(), run_config={}
    )
    reply = device_mod(msg, context, handler)
    expected_device = "cuda:0" if torch.cuda.is_available() else "cpu"  # runtime.accelerator=auto
    assert seen == {
        "partition": 6,
        "parts": 8,
        "accelerator": expected_device,
        "lr": 0.2,
        "records": ["arrays", "config"],
    }
    assert context.node_config == {"partition-id": 0}  # restored after the call
    report = client_report(reply)
    assert report.device == "jetson_nano-000" and report.num_examples == 5


def test_a_message_without_fedbench_passes_through_untouched() -> None:
    task_identity()
    msg = Message(
        RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=1, message_type="train"
    )
    context = Context(run_id=1, node_id=9, node_config={}, state=RecordDict(), run_config={})
    seen: list[Message] = []

    def handler(m: Message, c: Context) -> Message:
        seen.append(m)
        return Message(RecordDict(), reply_to=m)

    reply = device_mod(msg, context, handler)
    assert seen == [msg] and dict(msg.content["config"]) == {"x": 1}
    assert REPORT not in reply.content.config_records and TASK not in msg.content


def test_a_handler_that_raises_is_a_failed_report_not_a_lost_round() -> None:
    experiment = _typed([f"app={APP}", "fleet=mixed8"])
    msg = train_message(experiment, 0, ArrayRecord(Net(32).state_dict()))  # type: ignore[arg-type]
    context = Context(run_id=1, node_id=9, node_config={}, state=RecordDict(), run_config={})

    def broken(msg: Message, context: Context) -> Message:
        raise ValueError("the app's own bug")

    report = client_report(device_mod(msg, context, broken))
    assert report.status == "failed" and report.reason == "ValueError: the app's own bug"


def test_a_physical_node_refuses_to_be_an_emulated_device() -> None:
    experiment = _typed([f"app={APP}", "fleet=mixed8"])
    msg = train_message(experiment, 0, ArrayRecord(Net(32).state_dict()))  # type: ignore[arg-type]
    node = {"device-name": "my-pi", "profile": "auto"}
    context = Context(run_id=1, node_id=9, node_config=node, state=RecordDict(), run_config={})
    with pytest.raises(Exception, match="physical device 'my-pi'.*emulated device 'meizu_16t-000'"):
        device_mod(msg, context, lambda m, c: m)


@pytest.mark.parametrize("reads", [False, True])
def test_the_reply_names_an_algorithm_key_the_app_never_read(reads: bool) -> None:
    """FedProx sends proximal-mu: an app that ignores it trains FedAvg, and the reply says so."""
    from fedbench.protocol import UNREAD

    experiment = _typed([f"app={APP}", "fleet=mixed8", "algorithm=fedprox"])
    sent = {"lr": 0.05, "proximal-mu": 0.1, "server-round": 1}
    msg = train_message(experiment, 0, ArrayRecord(Net(32).state_dict()), config=sent)  # type: ignore[arg-type]
    context = Context(run_id=1, node_id=9, node_config={}, state=RecordDict(), run_config={})

    def handler(m: Message, c: Context) -> Message:
        config = m.content["config"]
        assert float(config["lr"]) == 0.05  # read the Flower way
        if reads:
            assert config.get("proximal-mu") == 0.1
        arrays = next(iter(m.content.array_records.values()))
        metrics = MetricRecord({"num-examples": 5})
        return Message(RecordDict({"arrays": arrays, "metrics": metrics}), reply_to=m)

    reply = device_mod(msg, context, handler)
    unread = reply.content.config_records.get(UNREAD)
    if reads:
        assert unread is None
    else:
        assert unread is not None and list(unread["keys"]) == ["proximal-mu"]
