"""The algorithm seam: a server half the server asks, a client half with per-device state
and a hook on the reply, shown with SCAFFOLD (fedbench.algorithms.scaffold)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import FedAvg

from fedbench.algorithms.base import PREDICTED, RunFacts, server_half
from fedbench.algorithms.scaffold import PREFIX, STATE, Scaffold, scaffold_step, with_variates
from fedbench.arrays import decode
from fedbench.errors import FedbenchError
from fedbench.experiment.compose import compose_experiment
from fedbench.experiment.schema import Experiment
from fedbench.protocol import CONTEXT_PREFIX
from fedbench.server.offer import Offer
from tests.helpers import task_identity, train_message

FACTS = RunFacts({}, 4, None, True, "sync", None, Offer.device_of)


def test_a_plain_strategy_gets_the_neutral_server_half_and_behaves_as_before() -> None:
    half = server_half(FedAvg())
    nan = math.nan
    pred = {k: np.array([10.0, 30.0, nan, 5.0]) for k in PREDICTED}
    pred["mem_budget_mb"] = np.array([20.0, 20.0, 20.0, nan])
    asked: list[object] = []

    def predict(model: object) -> dict[str, np.ndarray]:
        asked.append(model)
        return pred

    kept, fits = half.fit_devices(FACTS, predict)
    assert asked == [None]  # the experiment's model, predicted once
    # as before: a device is refused where its peak is over its budget (NaN limits nothing)
    assert np.flatnonzero(~fits).tolist() == [1]
    assert kept is pred and half.trained_rate == 1.0 and half.evaluated_rates() == ()
    arrays = ArrayRecord({"w": torch.ones(2)})
    assert half.model_arrays(arrays) is arrays
    half.check_run(FACTS)  # refuses nothing
    assert server_half(Scaffold()) is not half  # a strategy with a server half is asked itself


def test_scaffold_server_sends_x_and_c_and_steps_both() -> None:
    task_identity()
    strategy = Scaffold(global_lr=1.0)
    strategy.fit_devices(FACTS, lambda m: {k: np.zeros(4) for k in PREDICTED})
    arrays = ArrayRecord({"w": torch.ones(2), "n": torch.tensor(3)})
    sent = list(strategy.configure_train(1, arrays, ConfigRecord({"lr": 0.1}), Offer([0, 1])))
    content = sent[0].content
    assert content["config"]["scaffold"] is True
    got = {k: decode(a) for k, a in content["arrays"].items()}
    assert set(got) == {"w", "n", PREFIX + "w"} and not got[PREFIX + "w"].any()  # c starts at 0
    ys = [
        {"w": np.full(2, y), "n": np.array(3), PREFIX + "w": np.full(2, d)}
        for y, d in [(3, 2), (5, 6)]
    ]
    replies = [
        Message(
            RecordDict(
                {
                    "arrays": ArrayRecord({k: torch.from_numpy(np.array(v)) for k, v in y.items()}),
                    "metrics": MetricRecord({"num-examples": 10}),
                }
            ),
            dst_node_id=i + 1,
            message_type="train",
        )
        for i, y in enumerate(ys)
    ]
    new, _ = strategy.aggregate_train(1, replies)
    assert new is not None
    out = {k: decode(a) for k, a in new.items()}
    np.testing.assert_allclose(out["w"], 4.0)  # x + mean(y_i - x), unweighted
    np.testing.assert_allclose(out[PREFIX + "w"], 2.0)  # c + (2 + 6) / N, N = 4 devices
    assert strategy.model_arrays(new).keys() == {"w", "n"}  # what the server evaluates
    np.testing.assert_allclose(
        scaffold_step(
            with_variates({"w": np.ones(1)}),
            [{"w": np.full(1, 3.0), PREFIX + "w": np.ones(1)}],
            0.5,
            2,
        )["w"],
        2.0,  # x + 0.5 (3 - 1)
    )


def _experiment() -> Experiment:
    return compose_experiment(["experiment=smoke", "algorithm=scaffold", "scenario.days=1"])


def _scaffold_message(experiment: Experiment, device: int, state: RecordDict | None) -> Message:
    from fedbench.models.width import build_at

    torch.manual_seed(0)
    model = build_at(experiment.model.to_plain(), 1.0).state_dict()
    arrays = {k: decode(a) for k, a in ArrayRecord(model).items()}
    record = ArrayRecord(
        {k: torch.from_numpy(np.array(v)) for k, v in with_variates(arrays).items()}
    )
    msg = train_message(
        experiment, device, record, config={"scaffold": True, "lr": 0.05, "local-epochs": 1}
    )
    for name, value in (state or RecordDict()).items():  # as the server carries it
        msg.content[CONTEXT_PREFIX + name] = value
    return msg


def _call(msg: Message, context: Context) -> Message:
    from fedbench.client.app import app

    return app(msg, context)


def test_scaffold_state_survives_rounds_per_device_and_the_reply_hook_adds_delta_c() -> None:
    experiment = _experiment()
    # One worker node serving two devices, as in simulation: its Context is not theirs.
    node = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    first = _call(_scaffold_message(experiment, 0, None), node)
    carried = RecordDict(
        {
            k[len(CONTEXT_PREFIX) :]: v
            for k, v in first.content.items()
            if k.startswith(CONTEXT_PREFIX)
        }
    )
    assert STATE in carried.array_records  # c_i+ kept for the device, back to the server
    assert len(node.state) == 0  # never the node's own
    delta = {k: decode(a) for k, a in first.content["arrays"].items() if k.startswith(PREFIX)}
    assert delta and any(np.abs(v).sum() > 0 for v in delta.values())  # the reply hook's delta c
    c_i = carried.array_records[STATE].to_torch_state_dict()
    for name, value in c_i.items():  # round 1: c = 0 and c_i = 0, so delta c_i = c_i+
        np.testing.assert_allclose(delta[PREFIX + name], value.numpy(), rtol=1e-5, atol=1e-7)
    # Round 2 of device 0 with its state: its correction c - c_i changes the update.
    again = _call(_scaffold_message(experiment, 0, carried), node)
    other = _call(_scaffold_message(experiment, 1, None), node)  # device 1: no state of its own
    fresh = _call(_scaffold_message(experiment, 0, None), node)
    w = "classifier.weight"
    assert not np.allclose(decode(again.content["arrays"][w]), decode(fresh.content["arrays"][w]))
    other_ci = {k: v for k, v in other.content.items() if k.startswith(CONTEXT_PREFIX)}[
        CONTEXT_PREFIX + STATE
    ].to_torch_state_dict()
    # device 1 started from c_i = 0, as device 0 did in round 1 (a different device's data)
    assert set(other_ci) == set(c_i)


def test_scaffold_refuses_a_user_app_and_asynchronous_rounds() -> None:
    strategy = Scaffold()
    with pytest.raises(FedbenchError, match="own train handler"):
        strategy.check_run(RunFacts({}, 4, "my_app", True, "sync", None, Offer.device_of))
    with pytest.raises(FedbenchError, match="synchronous"):
        strategy.check_run(RunFacts({}, 4, None, False, "fedbuff", None, Offer.device_of))
    with pytest.raises(FedbenchError, match="global_lr"):
        Scaffold(global_lr=0)


def test_the_server_carries_each_devices_state_to_its_next_message() -> None:
    from fedbench.core.device import DeviceSpec
    from fedbench.server.fleet_strategy import FleetStrategy
    from fedbench.server.replies import Sent

    task_identity()
    fleet = FleetStrategy(FedAvg(), None, None, None, "", [])  # type: ignore[arg-type]
    devices = [DeviceSpec(i, f"d{i}", "p", "emulated") for i in range(2)]
    shared = RecordDict({"config": ConfigRecord({"lr": 0.1})})
    out = [Message(shared, dst_node_id=i + 1, message_type="train") for i in range(2)]
    sent = [Sent(d, out[0], "emulated", 0.0, 0, 0.0) for d in devices]  # one call, two devices
    reply = Message(
        RecordDict(
            {
                "0:metrics": MetricRecord({"num-examples": 1}),
                f"0:{CONTEXT_PREFIX}{STATE}": ArrayRecord({"w": torch.ones(1)}),
            }
        ),
        reply_to=out[0],
    )
    (kept,) = fleet.keep_states([reply], sent)
    assert list(kept.content.keys()) == ["0:metrics"]  # the state never reaches aggregation
    again = fleet.with_states(out)
    assert CONTEXT_PREFIX + STATE in again[0].content  # device 0's, to device 0 only
    assert again[1] is out[1] and CONTEXT_PREFIX + STATE not in again[1].content
