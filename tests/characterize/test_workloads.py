"""Workloads above exact_max_batch are extrapolated: exact in counts, close in workspace."""

from __future__ import annotations

import pytest

from fedbench.characterize.models import ModelRef
from fedbench.characterize.workloads import MEASURED, WorkloadBook, extrapolate, forward_pass
from fedbench.core.workload import OP_CLASSES
from fedbench.errors import FedbenchError

MODELS = (
    ModelRef("small_cnn"),
    ModelRef("fc_only", (("depth", 2), ("width", 64))),
    ModelRef("conv_only", (("depth", 2), ("width", 16))),
    ModelRef("dwconv_only", (("depth", 1), ("width", 32))),
)


@pytest.mark.parametrize("ref", MODELS, ids=lambda r: r.label)
def test_extrapolated_workload_matches_a_measured_one(ref: ModelRef) -> None:
    book = WorkloadBook(exact_max_batch=16)
    lo, hi, far = book.measured(ref, 2), book.measured(ref, 4), book.measured(ref, 16)
    guess = extrapolate(lo, hi, 16)
    assert guess.batch_size == 16 and guess.input_shape == far.input_shape
    # Every FLOP and byte count is affine in the batch: exact.
    for phase in ("forward", "backward"):
        for c in OP_CLASSES:
            got, want = getattr(guess, phase)[c], getattr(far, phase)[c]
            assert got.flops == pytest.approx(want.flops, rel=1e-9, abs=1e-6)
            assert got.bytes == pytest.approx(want.bytes, rel=1e-9, abs=1e-6)
    assert guess.optimizer == far.optimizer
    for key in ("param_bytes", "grad_bytes", "optimizer_state_bytes", "input_bytes"):
        assert getattr(guess, key) == getattr(far, key), key
    assert guess.saved_activation_bytes == pytest.approx(far.saved_activation_bytes, rel=1e-6)
    # The transient workspace is a peak, not a count: close, and the peak with it.
    assert guess.peak_bytes == pytest.approx(far.peak_bytes, rel=0.1)


def test_book_measures_up_to_the_limit_and_extrapolates_above() -> None:
    book = WorkloadBook(exact_max_batch=4)
    ref = ModelRef("small_cnn")
    w, source = book.get(ref, 4)
    assert source == MEASURED and w.batch_size == 4
    w, source = book.get(ref, 64)
    assert source == "extrapolated from batch 2,4" and w.batch_size == 64
    assert w.total_flops == pytest.approx(16 * book.get(ref, 4)[0].total_flops, rel=0.05)


def test_forward_pass_keeps_only_the_forward_work() -> None:
    w = WorkloadBook(2).measured(ModelRef("small_cnn"), 2)
    f = forward_pass(w)
    assert f.forward == w.forward
    assert all(c.flops == 0 and c.bytes == 0 for c in f.backward.values())
    assert f.optimizer.flops == 0 and f.grad_bytes == 0 and f.saved_activation_bytes == 0
    assert f.param_bytes == w.param_bytes and 0 < f.total_flops < w.total_flops / 2


def test_book_needs_two_measured_anchors() -> None:
    with pytest.raises(FedbenchError, match="exact_max_batch=1"):
        WorkloadBook(1)


def test_net_overrides_are_checked() -> None:
    with pytest.raises(FedbenchError, match="no field 'depht'"):
        ModelRef("conv_only", (("depht", 2),)).build()
    assert ModelRef("conv_only", (("depth", 2), ("width", 8))).label == "conv_only[depth=2,width=8]"
