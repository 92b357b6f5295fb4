"""Malicious and broken replies against the round loop: each refused or cleaned, with its reason.

Three honest devices add +1 to every weight; a fourth sends one of the
replies a hostile or careless client could. The round completes, the
attacker's row says why it was refused, and the global model is what the
honest devices alone make of it (+1). Milliseconds each: fabricated devices
on the FakeGrid (tests/server/fakes.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fedbench.core.device import DeviceSpec
from fedbench.core.records import RoundReport, from_record, to_record
from fedbench.devices.meters import make_meter
from fedbench.experiment.schema import DefenseConfig
from fedbench.protocol import REPORT
from fedbench.server.defense import CostBounds, Defense, bounds_for, check_costs
from fedbench.server.run import LoopState, RoundOutcome
from tests.server.fakes import Device, Recorder, build_loop, device, spec, weights

HONEST = {n: device(1.0, 1.0, examples=10) for n in ("a", "b", "c")}


def _with(edit: Callable[[RecordDict], RecordDict | None], base: Device | None = None) -> Device:
    """The honest reply, then edited by the attacker."""
    honest = base or device(1.0, 1.0, examples=10)

    def reply(msg: Message) -> RecordDict | None:
        return edit(honest(msg))

    return reply


def _round(
    attacker: Device, defense: Defense | None = None
) -> tuple[LoopState, RoundOutcome, RoundReport]:
    hook = Recorder()
    loop, _, _ = build_loop({**HONEST, "z": attacker}, k=4, hooks=[hook], defense=defense)
    after = loop.run([spec(1)], LoopState(0, 100.0, 0, weights(0.0)))
    outcome = hook.outcomes[0]
    assert isinstance(outcome, RoundOutcome)
    z = next(r for r in outcome.reports if r.device == "z")
    return after, outcome, z


def _honest_average(after: LoopState) -> None:
    w = after.arrays["w"].numpy()
    assert w.dtype == np.float32, w.dtype  # never promoted by a client's dtype
    assert np.allclose(w, 1.0), w


def _set_arrays(values: Callable[[np.ndarray], np.ndarray]) -> Callable[[RecordDict], RecordDict]:
    def edit(content: RecordDict) -> RecordDict:
        arrays = content.array_records["arrays"]
        content["arrays"] = ArrayRecord(
            {k: torch.from_numpy(values(v.numpy())) for k, v in arrays.items()}
        )
        return content

    return edit


def _set_metric(**values: float) -> Callable[[RecordDict], RecordDict]:
    def edit(content: RecordDict) -> RecordDict:
        content["metrics"] = MetricRecord({**dict(content.metric_records["metrics"]), **values})
        return content

    return edit


def _set_report(**values: float) -> Callable[[RecordDict], RecordDict]:
    def edit(content: RecordDict) -> RecordDict:
        report = from_record(content.config_records[REPORT])
        content[REPORT] = to_record(replace(report, **values))  # type: ignore[arg-type]
        return content

    return edit


def test_huge_finite_values_are_refused_by_the_distance_bound() -> None:
    after, outcome, z = _round(_with(_set_arrays(lambda v: np.full_like(v, 3e38))))
    _honest_average(after)
    assert z.status == "failed" and "update distance" in z.reason and "median" in z.reason
    assert outcome.aggregated == 3


def test_scaled_weights_claiming_a_billion_examples_are_refused() -> None:
    edit = _set_arrays(lambda v: v * 1e4)
    after, _, z = _round(_with(lambda c: _set_metric(**{"num-examples": 1e9})(edit(c))))
    _honest_average(after)
    assert z.status == "failed" and "'num-examples'=1e+09 exceeds" in z.reason


def test_the_scenarios_count_bounds_num_examples() -> None:
    defense = Defense(examples={"z": 10})
    after, _, z = _round(_with(_set_metric(**{"num-examples": 11})), defense)
    _honest_average(after)
    assert z.status == "failed" and "exceeds the 10 examples this device holds" in z.reason


@pytest.mark.parametrize("n", [-5, 0, 2.5, math.inf])
def test_num_examples_must_be_a_positive_integer(n: float) -> None:
    after, _, z = _round(_with(_set_metric(**{"num-examples": n})))
    _honest_average(after)
    assert z.status == "failed" and "is not a positive integer" in z.reason


def test_an_ok_report_without_num_examples_is_refused() -> None:
    def edit(content: RecordDict) -> RecordDict:
        content["metrics"] = MetricRecord({"train_loss": 0.5})
        return content

    after, _, z = _round(_with(edit))
    _honest_average(after)
    assert z.status == "failed" and "no 'num-examples' metric" in z.reason


def test_integer_arrays_are_refused() -> None:
    after, _, z = _round(_with(_set_arrays(lambda v: v.astype(np.int64) * 1000)))
    _honest_average(after)
    assert z.status == "failed" and "is int64, the global model's is float32" in z.reason


def test_float64_updates_are_cast_and_do_not_promote_the_model() -> None:
    after, outcome, z = _round(_with(_set_arrays(lambda v: v.astype(np.float64))))
    _honest_average(after)  # float32 and +1: the cast update is averaged in
    assert z.status == "ok" and outcome.aggregated == 4


def test_a_float64_overflowing_float32_is_refused() -> None:
    after, _, z = _round(_with(_set_arrays(lambda v: np.full(v.shape, 1e300))))
    _honest_average(after)
    assert z.status == "failed" and "NaN/Inf" in z.reason


def test_extra_records_are_left_out_and_named() -> None:
    def edit(content: RecordDict) -> RecordDict:
        extra = RecordDict({"aaa": MetricRecord({"num-examples": 1e9})})  # sorts first
        extra["arrays"] = content.array_records["arrays"]
        extra["zzz"] = ArrayRecord({"w": torch.full((2, 2), 1e6)})
        extra["metrics"] = content.metric_records["metrics"]
        extra["junk"] = ConfigRecord({"x": 1})
        extra[REPORT] = content.config_records[REPORT]
        return extra

    after, outcome, z = _round(_with(edit))
    _honest_average(after)
    assert z.status == "ok" and outcome.aggregated == 4
    assert "ignored extra record(s) ['zzz', 'aaa', 'junk']" in z.reason


def test_several_array_records_none_named_arrays_are_refused() -> None:
    def edit(content: RecordDict) -> RecordDict:
        arrays = content.array_records["arrays"]
        return RecordDict(
            {
                "x": arrays,
                "y": arrays,
                "metrics": content.metric_records["metrics"],
                REPORT: content.config_records[REPORT],
            }
        )

    after, _, z = _round(_with(edit))
    _honest_average(after)
    assert z.status == "failed" and "none named 'arrays'" in z.reason


def test_a_lying_round_trip_never_moves_the_clock() -> None:
    after, _, z = _round(_with(_set_report(round_trip_s=1e12)))
    _honest_average(after)
    assert after.now_s == 101.0  # the honest devices' round trip, from 100 s
    assert z.status == "failed" and "round_trip_s=1e+12 outside" in z.reason
    assert math.isnan(z.round_trip_s) and math.isnan(z.end_s)


def test_negative_energy_and_impossible_battery_are_blanked_not_summed() -> None:
    after, _, z = _round(_with(_set_report(energy_j=-1e9, battery_pct=250.0)))
    _honest_average(after)
    assert z.status == "ok"  # the update is fine; the figures are not believed
    assert math.isnan(z.energy_j) and math.isnan(z.battery_pct)
    assert "energy_j=-1e+09 outside" in z.reason and "battery_pct=250 outside [0, 100]" in z.reason


def test_profile_bounds() -> None:
    rpi = bounds_for(make_meter(DeviceSpec(0, "rpi4-000", "rpi4", "emulated")), DefenseConfig())
    assert 6.0 < rpi.max_power_w < 40.0 and rpi.max_mem_mb == 4096.0
    report = RoundReport(1, 1, 0, "r", "rpi4", "emulated", "ok", round_trip_s=10.0)
    plausible = replace(report, avg_power_w=5.0, energy_j=50.0, peak_mem_mb=900.0)
    assert check_costs(plausible, rpi) == (plausible, [])
    # 10 s at the most power the board can draw, and a bit more
    liar = replace(report, energy_j=rpi.max_power_w * 10.0 * 1.5, temp_c_end=400.0)
    checked, problems = check_costs(liar, rpi)
    assert math.isnan(checked.energy_j) and math.isnan(checked.temp_c_end)
    assert any("exceeds" in p for p in problems) and any("temp_c_end=400" in p for p in problems)
    generic = CostBounds(max_round_trip_s=60.0, max_power_w=100.0)
    checked, problems = check_costs(replace(report, latency_s=math.inf), generic)
    assert math.isnan(checked.round_trip_s) and problems == ["latency_s=inf outside [0, 60]"]


def test_a_round_in_which_every_device_fails_is_said_and_a_run_of_them_fails() -> None:
    from fedbench.server.endings import UpdateWatch

    meta: dict[str, object] = {}
    watch = UpdateWatch(meta)
    broken = {n: device(1.0, status="failed") for n in ("a", "b")}
    loop, _, _ = build_loop(broken, k=2, hooks=[watch])
    state = loop.run(iter([spec(1), spec(2)]), LoopState(0, 0.0, 0, weights()))
    assert state.model_version == 0 and meta["rounds_without_update"] == [1, 2]
    ending = watch.ending()
    assert (ending.status, ending.failure) == ("failed", "no_updates")
    assert "no round produced an update (2 round(s)" in ending.error
    good = UpdateWatch({})
    loop, _, _ = build_loop(HONEST, k=3, hooks=[good])
    loop.run(iter([spec(1)]), LoopState(0, 0.0, 0, weights()))
    assert good.ending().status == "completed"


def test_a_node_claiming_another_devices_name_is_refused() -> None:
    from fedbench.protocol import NODE_NAME

    def claim(name: str) -> Callable[[RecordDict], RecordDict]:
        def edit(content: RecordDict) -> RecordDict:
            content.config_records[REPORT][NODE_NAME] = name
            return content

        return edit

    defense = Defense(names={"z": "zed-board"})
    after, _, z = _round(_with(claim("a-board")), defense)
    _honest_average(after)
    assert z.status == "failed"
    assert "announces itself as 'a-board', but holds the key registered for 'zed-board'" in z.reason
    _, outcome, z = _round(_with(claim("zed-board")), defense)
    assert z.status == "ok" and outcome.aggregated == 4


def test_scalar_arrays_keep_their_shape_round_after_round() -> None:
    """A BatchNorm counter is a 0-d array: cleaning an update must not make it 1-d."""
    from fedbench.server.replies import conform

    reference = ArrayRecord({"w": torch.zeros(2, 2), "n": torch.tensor(3)})
    update = ArrayRecord({"w": torch.ones(2, 2, dtype=torch.float64), "n": torch.tensor(4)})
    clean, problem = conform(update, reference)
    assert problem == "" and clean is not None
    assert clean["n"].shape == reference["n"].shape == ()
    assert clean["w"].numpy().dtype == np.float32


def test_submodel_updates_are_bounded_against_updates_of_their_own_width() -> None:
    """HeteroFL/FjORD send slices of different sizes: one device the whole model, the
    others a 1/16 slice. No norm compares those (the L2 norm refused an honest rate-1
    Raspberry Pi 4 among FjORD's slices in the submodel study; an RMS per parameter
    refused a 1/16 slice, whose weights move more). Each width is bounded by its own."""
    from fedbench.server.replies import Reply, _refuse_outliers
    from tests.helpers import task_identity

    task_identity()  # a Message needs the run it belongs to

    def reply(name: str, sent: np.ndarray, moved: float) -> Reply:
        instruction = Message(
            RecordDict({"arrays": ArrayRecord({"w": torch.from_numpy(sent)})}),
            dst_node_id=1,
            message_type="train",
        )
        update = RecordDict(
            {
                "arrays": ArrayRecord({"w": torch.from_numpy(sent + moved)}),
                "metrics": MetricRecord({"num-examples": 10}),
            }
        )
        report = RoundReport(
            round=1, day=1, node=1, device=name, profile="rpi4", kind="emulated", status="ok"
        )
        return Reply(DeviceSpec(0, name, "rpi4", "emulated"), report, update, None, instruction)

    whole, small = np.zeros(1600, dtype=np.float32), np.zeros(100, dtype=np.float32)
    replies = [reply("whole", whole, 0.01)]  # L2 0.4, four times the slices' 0.1
    replies += [reply(f"slice{i}", small, 0.01 * (1 + i / 10)) for i in range(4)]
    defense = Defense.build(DefenseConfig(max_norm_ratio=3.0), [])
    assert all(r.update is not None for r in _refuse_outliers(replies, ArrayRecord(), defense))
    replies.append(reply("attacker", small, 1.0))
    kept = _refuse_outliers(replies, ArrayRecord(), defense)
    assert [r.device.name for r in kept if r.update is None] == ["attacker"]
