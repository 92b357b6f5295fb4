"""Plan labels, parsing, short steps and the plan log."""

from __future__ import annotations

import pytest

from fedbench.core.plans import FULL, Plan, PlanLog, parse_plan
from fedbench.errors import FedbenchError


@pytest.mark.parametrize(
    ("plan", "label"),
    [
        (Plan(), "bs32"),
        (Plan(4), "4x8"),
        (Plan(1, 4), "bs32+ckpt4"),
        (Plan(4, 4), "4x8+ckpt4"),
        (Plan(32, 2), "32x1+ckpt2"),
    ],
)
def test_label_round_trip(plan: Plan, label: str) -> None:
    assert plan.name(32) == label
    assert parse_plan(label, 32) == plan


def test_full_is_any_batch() -> None:
    assert parse_plan("full", 7) == FULL
    assert parse_plan("full+ckpt3", 7) == Plan(1, 3)


@pytest.mark.parametrize(
    ("label", "needle"),
    [
        ("bs16", "names batch 16, not 32"),
        ("4x4", "not the batch size 32"),
        ("3x8", "not the batch size 32"),
        ("fast", "valid forms"),
        ("4x8+ckpt", "valid forms"),
    ],
)
def test_bad_labels_say_why(label: str, needle: str) -> None:
    with pytest.raises(FedbenchError, match=needle):
        parse_plan(label, 32)


def test_check_refuses_non_divisors() -> None:
    with pytest.raises(FedbenchError, match="divide the batch size 30"):
        Plan(4).check(30)


def test_short_step_slices_no_larger_than_the_plans_micro_batch() -> None:
    plan = Plan(4)  # 4 x 8 at batch 32
    assert plan.microbatches_for(32, 32) == 4
    assert plan.microbatches_for(32, 20) == 4  # 4 x 5
    assert plan.microbatches_for(32, 8) == 1
    assert plan.microbatches_for(32, 9) == 3  # 3 x 3 (no 2 x 4.5)
    assert Plan(16).microbatches_for(32, 7) == 7  # prime: 1-sample slices
    assert FULL.microbatches_for(32, 20) == 1


def test_log_runs_labels_and_lookup() -> None:
    log = PlanLog()
    for plan in (FULL, FULL, Plan(4), Plan(4), Plan(4, 2)):
        log.record(plan)
    assert log.runs == [(FULL, 2), (Plan(4), 2), (Plan(4, 2), 1)]
    assert log.steps == 5
    assert log.label(32) == "bs32>4x8>4x8+ckpt2"
    assert log.plan_at(1) == FULL and log.plan_at(2) == Plan(4) and log.plan_at(4) == Plan(4, 2)
    with pytest.raises(IndexError):
        log.plan_at(5)
