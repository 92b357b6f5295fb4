"""The round loop on fabricated replies: select, configure, collect, close, aggregate, account."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedMedian, FedProx

from fedbench.experiment.schema import DefenseConfig
from fedbench.protocol import TASK
from fedbench.server.app_loop import AppLoop
from fedbench.server.close import Deadline, FirstK
from fedbench.server.defense import Defense
from fedbench.server.evaluation import Evaluator
from fedbench.server.fleet_grid import FleetGrid
from fedbench.server.own_app import OwnServerApp
from fedbench.server.run import LoopState
from tests.server.fakes import Recorder, build_loop, device, spec, weights


def _state() -> LoopState:
    return LoopState(0, 100.0, 0, weights(0.0))


def test_a_round_aggregates_every_update_and_advances_the_clock() -> None:
    loop, grid, ledger = build_loop(
        {"a": device(1.0, 1.0), "b": device(2.0, 3.0), "c": device(4.0, 5.0)}, k=3
    )
    after = loop.run([spec(1)], _state())
    assert after.round == 1 and after.model_version == 1
    assert after.now_s == 104.0  # waits for the slowest (4 s)
    # FedAvg with equal weights: the mean of +1, +3, +5.
    assert np.allclose(after.arrays["w"].numpy(), 3.0)
    assert len(grid.sent) == 3 and all(TASK in m.content.config_records for m in grid.sent)


def test_hooks_see_the_round_in_order_and_the_reports() -> None:
    hook = Recorder()
    loop, _, _ = build_loop({"a": device(1.0), "b": device(2.0)}, k=2, hooks=[hook])
    state = loop.run(iter([spec(1), spec(2), spec(3)]), LoopState(1, 0.0, 0, weights()))
    assert state.round == 3 and state.model_version == 2  # round 1 was already done
    assert hook.calls == ["before 2 at 0", "after 2", "before 3 at 2", "after 3"]
    outcome = hook.outcomes[0]
    assert [r.device for r in outcome.reports] == ["a", "b"]  # type: ignore[attr-defined]
    assert [r.start_s for r in outcome.reports] == [0.0, 0.0]  # type: ignore[attr-defined]
    assert [r.end_s for r in outcome.reports] == [1.0, 2.0]  # type: ignore[attr-defined]


def test_a_deadline_times_out_the_late_update_but_keeps_its_energy() -> None:
    loop, _, _ = build_loop(
        {"fast": device(1.0, 1.0), "slow": device(9.0, 5.0, energy_j=7.0)},
        k=2,
        close=Deadline(deadline_s=5.0),
    )
    hook = Recorder()
    loop.hooks.append(hook)
    after = loop.run([spec(1)], _state())
    assert np.allclose(after.arrays["w"].numpy(), 1.0)  # only the fast update
    assert after.now_s == 105.0  # the round ends at the deadline
    slow = [r for r in hook.outcomes[0].reports if r.device == "slow"][0]  # type: ignore[attr-defined]
    assert slow.status == "timeout" and "deadline 5s" in slow.reason and slow.energy_j == 7.0


def test_first_k_keeps_the_earliest_k_of_the_overcommitted_round() -> None:
    devices = {n: device(t, t) for n, t in zip("abcd", (3.0, 1.0, 4.0, 2.0), strict=True)}
    loop, grid, _ = build_loop(devices, k=3, overcommit=0.34, close=FirstK())
    hook = Recorder()
    loop.hooks.append(hook)
    after = loop.run([spec(1)], _state())
    assert len(grid.sent) == 4  # ceil(3 x 1.34)
    statuses = {r.device: r.status for r in hook.outcomes[0].reports}  # type: ignore[attr-defined]
    assert statuses == {"a": "ok", "b": "ok", "c": "timeout", "d": "ok"}
    assert after.now_s == 103.0  # closed at the 3rd arrival
    assert np.allclose(after.arrays["w"].numpy(), 2.0)  # mean of +3, +1, +2


def test_replies_that_are_not_updates_become_reports_with_reasons() -> None:
    def nan_update(arrays: ArrayRecord) -> ArrayRecord:
        return ArrayRecord({"w": torch.full((2, 2), float("nan"))})

    def malformed(msg: object) -> RecordDict:
        content = device(1.0)(msg)  # type: ignore[arg-type]
        content["fedbench-report"]["status"] = "exploded"
        return content

    devices = {
        "good": device(1.0, 2.0),
        "nan": device(1.0, update=nan_update),
        "silent": lambda msg: None,
        "oom": device(1.0, status="oom"),
        "odd": malformed,
    }
    hook = Recorder()
    loop, _, _ = build_loop(devices, k=5, hooks=[hook])
    after = loop.run([spec(1)], _state())
    reports = {r.device: r for r in hook.outcomes[0].reports}  # type: ignore[attr-defined]
    assert reports["good"].status == "ok"
    assert reports["nan"].status == "failed" and "NaN" in reports["nan"].reason
    assert reports["silent"].status == "dropped" and reports["silent"].reason == "no reply"
    assert reports["oom"].status == "oom"
    assert reports["odd"].status == "failed" and "exploded" in reports["odd"].reason
    assert np.allclose(after.arrays["w"].numpy(), 2.0)  # only the good update


def test_a_reply_without_a_report_is_an_unprofiled_device_and_counts() -> None:
    hook = Recorder()
    loop, _, ledger = build_loop(
        {"fedbench": device(1.0, 1.0), "stock": device(1.0, 3.0, report=False)}, k=2, hooks=[hook]
    )
    after = loop.run([spec(1)], _state())
    stock = [r for r in hook.outcomes[0].reports if r.device == "stock"][0]  # type: ignore[attr-defined]
    assert stock.kind == "unprofiled" and stock.status == "ok" and stock.num_examples == 10
    assert math.isnan(stock.energy_j) and math.isnan(stock.peak_mem_mb)
    assert stock.round_trip_s >= 0.0  # measured by the server
    assert np.allclose(after.arrays["w"].numpy(), 2.0)  # both updates averaged


def test_fedprox_sends_its_proximal_mu_and_fedmedian_aggregates() -> None:
    prox = FedProx(proximal_mu=0.3, min_available_nodes=1, min_train_nodes=1, fraction_evaluate=0)
    loop, grid, _ = build_loop({"a": device(1.0), "b": device(1.0)}, k=2, algorithm=prox)
    loop.run([spec(1)], _state())
    configs = [m.content.config_records["config"] for m in grid.sent]
    assert all(c["proximal-mu"] == 0.3 and c["server-round"] == 1 for c in configs)
    median = FedMedian(min_available_nodes=1, min_train_nodes=1, fraction_evaluate=0)
    devices = {"a": device(1.0, 1.0), "b": device(1.0, 2.0), "c": device(1.0, 100.0)}
    # Without the server's norm bound (defense), the robust aggregator alone.
    off = Defense(DefenseConfig(max_norm_ratio=None))
    loop, _, _ = build_loop(devices, k=3, algorithm=median, defense=off)
    after = loop.run([spec(1)], _state())
    assert np.allclose(after.arrays["w"].numpy(), 2.0)  # the median shrugs off +100


def test_a_strategy_that_wants_more_devices_than_picked_skips_the_round() -> None:
    greedy = FedMedian(min_available_nodes=3, min_train_nodes=3, fraction_evaluate=0)
    hook = Recorder()
    loop, grid, _ = build_loop({"a": device(1.0), "b": device(1.0)}, k=2, algorithm=greedy)
    loop.hooks.append(hook)
    after = loop.run([spec(1)], _state())
    assert not grid.sent and after.model_version == 0
    assert "waits for more than the 2 device(s)" in hook.outcomes[0].skipped  # type: ignore[attr-defined]


def test_the_ledger_hook_feeds_the_selector() -> None:
    from fedbench.server.hooks import LedgerHook

    loop, _, ledger = build_loop({"a": device(1.0), "b": device(2.0)}, k=2)
    loop.hooks.append(LedgerHook(ledger))
    loop.run([spec(1)], _state())
    assert list(ledger.participation) == [1, 1]
    assert list(ledger.round_trip_s) == [1.0, 2.0]


def test_evaluation_runs_on_evaluation_rounds_only() -> None:
    calls: list[int] = []

    class Count:
        def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
            calls.append(server_round)
            return {"accuracy": 0.5}

    loop, _, _ = build_loop({"a": device(1.0)}, k=1, evaluator=Count())  # type: ignore[arg-type]
    state = loop.run(iter([spec(1), spec(2, evaluate=True)]), _state())
    assert calls == [2] and state.round == 2


def test_train_metrics_come_from_the_wrapped_strategy() -> None:
    loop, _, _ = build_loop({"a": device(1.0), "b": device(1.0)}, k=2)
    hook = Recorder()
    loop.hooks.append(hook)
    loop.run([spec(1)], _state())
    metrics = hook.outcomes[0].train_metrics  # type: ignore[attr-defined]
    assert isinstance(metrics, MetricRecord) and metrics["train_loss"] == 0.5


def test_devices_sharing_a_call_give_the_same_round_as_one_call_each() -> None:
    devices = {n: device(t, t) for n, t in zip("abcd", (3.0, 1.0, 4.0, 2.0), strict=True)}
    alone, grid_alone, _ = build_loop(devices, k=4)
    shared, grid_shared, _ = build_loop(devices, k=4, per_call=2)
    hooks = Recorder(), Recorder()
    alone.hooks.append(hooks[0])
    shared.hooks.append(hooks[1])
    a = alone.run([spec(1)], _state())
    b = shared.run([spec(1)], _state())
    assert len(grid_alone.sent) == 4 and len(grid_shared.sent) == 2
    assert np.array_equal(a.arrays["w"].numpy(), b.arrays["w"].numpy()) and a.now_s == b.now_s
    strip = [[(r.device, r.status, r.round_trip_s) for r in h.outcomes[0].reports] for h in hooks]  # type: ignore[attr-defined]
    assert strip[0] == strip[1]


def test_in_a_shared_call_one_devices_failure_is_its_own() -> None:
    def crashed(msg: object) -> RecordDict:
        raise RuntimeError("boom")  # the device's ClientApp raised: the group mod records it

    hook = Recorder()
    devices = {"a": device(1.0, 2.0), "b": crashed, "c": lambda msg: None, "d": device(1.0, 2.0)}
    loop, _, _ = build_loop(devices, k=4, per_call=2, hooks=[hook])
    after = loop.run([spec(1)], _state())
    reports = {r.device: r for r in hook.outcomes[0].reports}  # type: ignore[attr-defined]
    assert reports["b"].status == "failed" and reports["b"].reason == "RuntimeError: boom"
    assert reports["c"].status == "dropped" and reports["c"].reason == "no reply"
    assert np.allclose(after.arrays["w"].numpy(), 2.0)  # a and d


def test_fedbenchs_own_rounds_are_flower_start_on_the_fleet_grid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One loop: fedbench's own app is FleetStrategy.start() on the FleetGrid, in AppLoop."""
    loop, grid, _ = build_loop({"a": device(1.0), "b": device(2.0)}, k=2)
    assert isinstance(loop, AppLoop) and isinstance(loop.app, OwnServerApp)
    asked: list[tuple[int, type]] = []
    configure = loop.fleet.configure_train

    def spy(server_round: int, arrays: ArrayRecord, config: ConfigRecord, g: Grid) -> object:
        asked.append((server_round, type(g)))
        return configure(server_round, arrays, config, g)

    loop.fleet.configure_train = spy  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="flwr"):
        after = loop.run([spec(1), spec(2)], _state())
    assert "Starting FleetStrategy strategy" in caplog.text  # Flower's own start()
    assert asked == [(1, FleetGrid), (2, FleetGrid)]
    assert after.round == 2 and after.model_version == 2 and len(grid.sent) == 4


def test_a_resumed_start_tells_the_strategy_the_schedules_round_numbers() -> None:
    """start() counts from 1; after a checkpoint of round 2 its round 1 is the schedule's 3."""
    loop, grid, _ = build_loop({"a": device(1.0), "b": device(2.0)}, k=2)
    outcomes = Recorder()
    loop.hooks.append(outcomes)
    after = loop.run([spec(1), spec(2), spec(3)], LoopState(2, 100.0, 2, weights(0.0)))
    assert after.round == 3 and after.model_version == 3
    assert outcomes.calls == ["before 3 at 100", "after 3"]
    assert {m.content["config"]["server-round"] for m in grid.sent} == {3}  # FedAvg's


def test_own_evaluation_scores_the_aggregate_after_evaluation_rounds_only() -> None:
    scored: list[tuple[int, float]] = []

    class Scores(Evaluator):
        def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
            scored.append((server_round, float(arrays["w"].numpy().mean())))
            return {"accuracy": 0.5}

    hook = Recorder()
    loop, _, _ = build_loop({"a": device(1.0, 1.0)}, k=1, evaluator=Scores(), hooks=[hook])
    loop.run([spec(1), spec(2, evaluate=True)], _state())
    assert scored == [(2, 2.0)]  # the model after round 2's aggregate, never start()'s round 0
    evaluations = [o.evaluation for o in hook.outcomes]  # type: ignore[attr-defined]
    assert evaluations == [None, {"accuracy": 0.5}]


def test_the_host_round_ends_at_the_aggregate_not_after_scoring_the_model() -> None:
    # host_round_s is send, train, receive, aggregate (docs/results.md): start() scores
    # the model after the round's aggregate, which the round's host time leaves out, as
    # RoundLoop's did (aa90f63 counted it: the throughput benchmark's DenseNet40 warm
    # round read 14.2 s for 5.9 s of rounds).
    import time

    class Slow(Evaluator):
        def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
            time.sleep(0.5)
            return {"accuracy": 0.5}

    hook = Recorder()
    loop, _, _ = build_loop({"a": device(1.0, 1.0)}, k=1, evaluator=Slow(), hooks=[hook])
    loop.run([spec(1, evaluate=True), spec(2, evaluate=True)], _state())
    outcomes = hook.outcomes  # type: ignore[attr-defined]
    assert [o.evaluation for o in outcomes] == [{"accuracy": 0.5}] * 2
    assert all(0.0 <= o.server_s <= o.host_round_s < 0.4 for o in outcomes), [
        (o.host_round_s, o.server_s) for o in outcomes
    ]
