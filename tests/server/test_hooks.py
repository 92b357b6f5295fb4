"""Run hooks: a hook can stop the run after a round; built-in ones come from the `hooks` group."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from flwr.app import ArrayRecord

from fedbench.errors import FedbenchError
from fedbench.server.fedbuff import FedBuff
from fedbench.server.hooks import RecordHook, Signals, build_hooks
from fedbench.server.run import LoopState, RoundOutcome, ServerHook, Stop
from fedbench.server.stopping import Budget, TargetAccuracy
from strategies.oort import Oort
from strategies.random import RandomSelection
from tests.bad_inputs import _typed
from tests.server.fakes import Recorder, build_loop, device, spec, weights


class _Accuracy:
    """An evaluator whose accuracy rises 0.2 per round."""

    def __call__(self, server_round: int, arrays: ArrayRecord) -> dict[str, float]:
        return {"accuracy": 0.2 * server_round}


def test_a_target_accuracy_stops_the_run_after_the_round_that_reached_it() -> None:
    record = Recorder()
    loop, _, _ = build_loop(
        {"a": device(1.0)},
        k=1,
        evaluator=_Accuracy(),
        hooks=[record, TargetAccuracy(0.5)],  # type: ignore[arg-type]
    )
    state = loop.run([spec(r, evaluate=True) for r in range(1, 6)], LoopState(0, 0.0, 0, weights()))
    assert state.round == 3  # 0.2, 0.4, 0.6: stopped after round 3, rounds 4 and 5 never ran
    assert [o.spec.round for o in record.outcomes] == [1, 2, 3]  # type: ignore[attr-defined]
    assert loop.stopped is not None and loop.stopped.round == 3
    assert loop.stopped.hook == "TargetAccuracy"
    assert loop.stopped.reason.startswith("accuracy 60.00% reached the target 50.00%")


def test_every_hook_still_sees_the_round_that_stopped_the_run() -> None:
    class StopNow(ServerHook):
        def on_round_end(self, outcome: RoundOutcome, state: LoopState) -> Stop | None:
            return Stop("enough")

    after = Recorder()
    loop, _, _ = build_loop({"a": device(1.0)}, k=1, hooks=[StopNow(), after])
    loop.run([spec(1), spec(2)], LoopState(0, 0.0, 0, weights()))
    assert after.calls == ["before 1 at 0", "after 1"]  # the checkpoint after it runs too
    assert loop.stopped is not None and (loop.stopped.hook, loop.stopped.reason) == (
        "StopNow",
        "enough",
    )


def test_a_virtual_time_budget_stops_fedbuff_too() -> None:
    budget = Budget(virtual_time_s=4.0)
    budget.on_run_begin(SimpleNamespace(writer=SimpleNamespace(energy_total=lambda: None)))  # type: ignore[arg-type]
    devices = {"fast": device(1.0, 1.0), "slow": device(3.0, 10.0)}
    mode = FedBuff(buffer_size=2, concurrency=2)
    loop, _, _ = build_loop(devices, k=2, hooks=[budget], mode=mode)
    state = loop.run([spec(r) for r in range(1, 20)], LoopState(0, 0.0, 0, weights()))
    assert 4.0 <= state.now_s < 6.0 and state.round < 19
    assert loop.stopped is not None and "virtual time" in loop.stopped.reason


def test_an_energy_budget_counts_what_the_records_summed() -> None:
    spent = [10.0]
    budget = Budget(energy_j=25.0)
    budget.on_run_begin(SimpleNamespace(writer=SimpleNamespace(energy_total=lambda: spent[0])))  # type: ignore[arg-type]
    state = LoopState(1, 0.0, 1, weights())
    assert budget.on_round_end(None, state) is None  # type: ignore[arg-type]
    spent[0] = 30.0
    stop = budget.on_round_end(None, state)  # type: ignore[arg-type]
    assert stop is not None and stop.reason.startswith(
        "energy 30.0 J spent reached the budget 25 J"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hooks.records=null"], "hooks: no entry builds fedbench.server.hooks.RecordHook"),
        (["hooks=[default,budget]"], "hooks.budget: set energy_j or virtual_time_s"),
        (
            ["hooks=[default,target_accuracy]", "hooks.target_accuracy.accuracy=90"],
            "hooks.target_accuracy: accuracy=90: must be > 0 and <= 1",
        ),
        (["+hooks.mine._target_=fedbench.server.run.Run"], "hooks.mine"),
    ],
)
def test_a_bad_hooks_list_is_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(FedbenchError, match=message):
        build_hooks(_typed(overrides))


def test_the_default_hooks_are_the_records_progress_loggers_and_checkpoint() -> None:
    hooks = build_hooks(_typed([]))
    assert [type(h).__name__ for h in hooks] == [
        "RecordHook",
        "ProgressHook",
        "LoggerHook",
        "CheckpointHook",
    ]
    assert isinstance(hooks[0], RecordHook)
    more = build_hooks(
        _typed(["hooks=[default,target_accuracy,budget]", "hooks.budget.energy_j=9"])
    )
    assert [type(h).__name__ for h in more][-2:] == ["TargetAccuracy", "Budget"]


def _signals(selector: object) -> tuple[Signals, list[str]]:
    run = SimpleNamespace(experiment=_typed(["algorithm=fedprox"]), selector=selector, warnings=[])
    hook = Signals()
    hook.on_run_begin(run)  # type: ignore[arg-type]
    return hook, run.warnings


def test_an_algorithm_key_the_app_never_read_is_warned_about_once() -> None:
    hook, warnings = _signals(RandomSelection(2))
    loop, _, _ = build_loop({"a": device(1.0), "b": device(1.0)}, k=2, hooks=[hook])
    unread = Recorder()
    loop.hooks.insert(0, unread)
    state = loop.run([spec(1)], LoopState(0, 0.0, 0, weights()))
    outcome = unread.outcomes[0]
    replies = [dataclasses.replace(r, unread=("proximal-mu",)) for r in outcome.replies]  # type: ignore[attr-defined]
    for _ in range(2):  # two rounds, two devices each: one warning
        hook.on_round_end(dataclasses.replace(outcome, replies=replies), state)  # type: ignore[type-var]
    assert len(warnings) == 1
    assert warnings[0].startswith("algorithm FedProx sends 'proximal-mu' but the app's ClientApp")


def test_oort_without_a_loss_from_any_reply_is_warned_about_once() -> None:
    hook, warnings = _signals(Oort(2))
    no_loss = {"a": device(1.0), "b": device(1.0)}
    loop, _, _ = build_loop(no_loss, k=2)
    seen = Recorder()
    loop.hooks.append(seen)
    state = loop.run([spec(1)], LoopState(0, 0.0, 0, weights()))
    outcome = seen.outcomes[0]
    hook.on_round_end(outcome, state)  # type: ignore[arg-type]
    assert warnings == []  # the fake devices report a loss
    lossless = [
        dataclasses.replace(r, report=dataclasses.replace(r.report, train_loss=float("nan")))
        for r in outcome.replies  # type: ignore[attr-defined]
    ]
    for _ in range(2):
        hook.on_round_end(dataclasses.replace(outcome, replies=lossless), state)  # type: ignore[type-var]
    assert len(warnings) == 1 and warnings[0].startswith("strategy Oort selects by train_loss")
