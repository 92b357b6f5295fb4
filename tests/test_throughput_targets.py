"""benchmarks/throughput.py fails (exit 1) when fedbench is over its targets against plain
Flower, so a regression of the warm-round ratio is caught where it is measured."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.helpers import load_benchmark


def _bench() -> ModuleType:
    return load_benchmark("throughput")


def _timings(bench: ModuleType, fedbench_warm: float, fedbench_wall: float) -> list[object]:
    t = bench.Timing
    return [
        t("fedbench", fedbench_wall, [9.0, fedbench_warm, fedbench_warm]),
        t("bare", 20.0, [5.0, 4.0, 4.0]),
        t("flower", 40.0, [9.0, 4.0, 4.0]),
        t("pooled", 20.0, [5.0, 3.0, 3.0]),
    ]


def test_ratios_within_the_targets_pass(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    assert bench._cpu_ratios("densenet", _timings(bench, 4.0, 48.0), 4) == []
    out = capsys.readouterr().out
    assert "warm round 1.000x (target <= 1)" in out and "whole run 1.200x (target <= 1.2)" in out


def test_a_slower_warm_round_is_named_over_its_target() -> None:
    bench = _bench()
    over = bench._cpu_ratios("densenet", _timings(bench, 4.4, 40.0), 4)
    assert over == ["densenet warm round 1.10x > 1"]
    over = bench._cpu_ratios("small", _timings(bench, 4.0, 44.0), 100)
    assert over == ["small whole run 1.10x > 1"]


def test_repeats_run_in_abba_order_and_pool_the_warm_rounds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    bench = _bench()
    order: list[str] = []

    def fake(kind: str, w: object, rounds: int, *rest: object) -> object:
        order.append(kind)
        second = order.count(kind) == 2
        rounds_s = [9.0, 4.0, 6.0] if second else [7.0, 5.0]
        return bench.Timing(kind, 20.0 if second else 10.0, rounds_s)

    monkeypatch.setattr(bench, "contender", fake)
    monkeypatch.setattr(bench, "fedbench_run", lambda w, r, out, acc: fake("fedbench", w, r))
    timings = bench._cpu_contenders({}, 3, tmp_path, 2)
    assert order == ["fedbench", "bare", "flower", "pooled", "pooled", "flower", "bare", "fedbench"]
    fb = timings[0]
    assert fb.name == "fedbench" and fb.wall_s == 15.0
    assert fb.rounds_s == [8.0, 5.0, 4.0, 6.0] and fb.warm_s == 5.0  # both runs' warm rounds
