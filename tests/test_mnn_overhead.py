"""benchmarks/mnn_overhead.py: MNN's host-side costs, the prior of cpu.mnn.step_overhead_mcycles.

The calls it divides by are fedbench's own MNN lowering of the chain, so they
are checked here; the timing needs MNN's Python package, which CI does not
install (the last test runs where it is).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from fedbench.errors import FedbenchError
from tests.helpers import load_benchmark


def _bench() -> ModuleType:
    return load_benchmark("mnn_overhead")


def test_a_chain_of_n_linear_layers_lowers_to_the_same_mnn_calls_per_layer() -> None:
    calls = _bench().chain_calls([1, 2, 5])
    # Per Linear(4, 4): its forward MatMul (bias fused), the backward's input
    # gradient, weight gradient and bias reduction, and SGD with momentum and
    # weight decay on its two tensors (4 update calls each).
    assert calls.per_layer == (1, 3, 8)
    # The softmax and loss: forward and backward, nothing to update.
    assert calls.fixed[2] == 0 and calls.fixed[0] >= 1 and calls.fixed[1] >= 1


def test_the_line_recovers_intercept_and_slope() -> None:
    a, b = _bench().line([1, 2, 4, 8], [0.3 + 0.2 * n for n in (1, 2, 4, 8)])
    assert a == pytest.approx(0.3) and b == pytest.approx(0.2)


def test_the_growth_recovers_the_cost_per_call_and_the_graph_size_that_doubles_it() -> None:
    calls = [196, 388, 772, 1540, 3076]
    ms = [0.13 + 0.02 * n * (1 + n / 2500) for n in calls]  # 0.13 ms per step
    c0, half = _bench().growth(calls, ms, 0.13)
    assert c0 == pytest.approx(0.02) and half == pytest.approx(2500)


def test_a_cost_per_call_that_does_not_grow_is_refused_not_divided_by() -> None:
    calls = [196, 388, 772]
    with pytest.raises(FedbenchError, match="does not grow with the graph"):
        _bench().growth(calls, [0.13 + 0.02 * n for n in calls[::-1]], 0.13)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["lengths=1,8", "long=4,16"], "long=4,16: give two chain lengths or more, all longer"),
        (["lengths=1,8", "long=32"], "long=32: give two chain lengths or more"),
    ],
)
def test_long_chains_that_cannot_show_the_growth_are_refused(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _bench().main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_long_may_be_empty(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "MNN", None)
    assert _bench().main(["lengths=1,2", "long="]) == 2  # parsed: it stops at the import
    assert "pip install MNN" in capsys.readouterr().err


def test_without_mnn_it_says_what_to_install_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "MNN", None)  # import MNN raises ImportError
    assert _bench().main(["threads=1", "lengths=1,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "benchmarks/mnn_overhead.py: error: needs MNN's Python package, "
        "which fedbench does not install: pip install MNN"
    ]


def test_one_chain_length_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(["lengths=4"]) == 2
    assert "lengths=4: give two chain lengths or more" in capsys.readouterr().err


def test_with_mnn_a_step_costs_more_for_a_longer_chain(tmp_path: Path) -> None:
    mnn = pytest.importorskip("MNN")
    bench = _bench()
    mnn.expr.lazy_eval(True)
    mnn.expr.set_thread_number(1)
    short, long = bench.step_seconds(mnn, [1, 16], steps=5, warmup=2, rounds=1)
    assert 0.0 < short < long
