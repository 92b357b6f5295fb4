"""The planner: full when it fits, the fastest fitting plan when not, precise reasons when none."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from fedbench.core.plans import FULL, Plan
from fedbench.core.workload import Workload
from fedbench.measure.workload import measure_workload
from fedbench.train.planner import PlanChoice, choose_plan, segment_counts
from tests.train.nets import Trunked

SHAPE = (3, 16, 16)
BS = 32


@pytest.fixture(scope="module")
def net() -> nn.Module:
    torch.manual_seed(0)
    return Trunked(norm=True, width=16)


def _peak_mb(net: nn.Module, plan: Plan) -> float:
    w = measure_workload(
        net,
        SHAPE,
        BS,
        model_name="trunked",
        plan=plan.name(BS),
        microbatches=plan.microbatches,
        checkpoint_segments=plan.checkpoint_segments,
    )
    return w.peak_bytes / 2**20


def _choose(net: nn.Module, budget: float, **kw: object) -> PlanChoice:
    return choose_plan(net, SHAPE, BS, budget, model_name="trunked", **kw)  # type: ignore[arg-type]


def test_full_batch_when_it_fits_measures_nothing_else(net: nn.Module) -> None:
    choice = _choose(net, 1000.0)
    assert choice.plan == FULL and choice.feasible and choice.label == "bs32"
    assert [e.plan for e in choice.tried] == [FULL]
    assert choice.predicted_peak_mb == pytest.approx(_peak_mb(net, FULL))


def test_over_budget_picks_the_fewest_micro_batches_that_fit(net: nn.Module) -> None:
    full = _peak_mb(net, FULL)
    budget = 0.6 * full
    choice = _choose(net, budget)
    assert choice.feasible and choice.plan != FULL
    assert choice.predicted_peak_mb <= budget
    assert choice.predicted_peak_mb == pytest.approx(_peak_mb(net, choice.plan))
    # The proxy charges recompute: micro-batching wins when it fits; no fewer micro-batches fit.
    assert choice.plan.checkpoint_segments == 0
    assert choice.plan.microbatches == 2 and full > budget
    assert "fits" in choice.reason and choice.time_source == "proxy"


def test_time_fn_decides_between_fitting_plans(net: nn.Module) -> None:
    budget = 0.6 * _peak_mb(net, FULL)

    def passes(w: Workload) -> float:  # a device where every pass is costly, FLOPs free
        return float(w.steps_per_update)

    choice = _choose(net, budget, time_fn=passes)
    assert choice.time_source == "device"
    assert choice.plan.microbatches == 1 and choice.plan.checkpoint_segments > 0
    assert choice.predicted_peak_mb <= budget and choice.predicted_time_s == 1.0


def test_holds_fn_rules_out_plans_whose_resident_set_the_device_cannot_keep(
    net: nn.Module,
) -> None:
    # A device (an MNN phone) whose RAM holds a graph of at most 8 samples:
    # the full batch's tensors fit the budget, its resident set does not.
    def holds(w: Workload) -> bool:
        return BS // w.steps_per_update <= 8

    choice = _choose(net, 1000.0, holds_fn=holds)
    assert choice.feasible and choice.plan.microbatches == 4
    assert not next(e for e in choice.tried if e.plan == FULL).fits
    nothing = _choose(net, 1000.0, holds_fn=lambda w: False)
    assert not nothing.feasible
    assert "resident set beyond the device's RAM, although their tensors fit" in nothing.reason


def test_tight_budget_combines_both(net: nn.Module) -> None:
    budget = 0.45
    choice = _choose(net, budget)
    assert choice.feasible and choice.predicted_peak_mb <= budget
    assert choice.plan.microbatches > 1
    # Pruning: plans ruled out by the 1/m lower bound were never measured.
    assert len(choice.tried) <= 8


@pytest.mark.parametrize(
    ("budget", "needle"),
    [
        (0.1, r"weights \+ gradients \+ optimizer state alone \(0\.148 MB\) exceed the budget"),
        (0.2, r"and the batch of 32 inputs \(0\.094 MB\) exceed the budget \(0\.2 MB\)"),
        (0.3, r"even 1-sample micro-batches with \d checkpoint segments need 0\.3\d+ MB > 0\.3 MB"),
    ],
)
def test_infeasible_says_why(net: nn.Module, budget: float, needle: str) -> None:
    choice = _choose(net, budget)
    assert not choice.feasible
    assert re.search(needle, choice.reason), choice.reason


def test_no_trunk_means_micro_batches_only() -> None:
    class Flat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
            self.head = nn.Linear(16 * 16 * 16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(torch.relu(self.conv(x)).flatten(1))

    flat = Flat()
    assert segment_counts(flat) == [0]
    choice = choose_plan(flat, SHAPE, BS, 0.62, model_name="flat")
    assert not choice.feasible
    assert "no sequential trunk to checkpoint" in choice.reason


def test_candidates_restrict_the_search(net: nn.Module) -> None:
    budget = 0.6 * _peak_mb(net, FULL)
    cands = [Plan(1, 4), Plan(4), FULL]
    choice = _choose(net, budget, candidates=cands)
    assert choice.feasible and choice.plan in cands and choice.predicted_peak_mb <= budget
    none = _choose(net, 0.3, candidates=[FULL, Plan(2)])
    assert not none.feasible and "none of the 2 candidate plans fits" in none.reason
