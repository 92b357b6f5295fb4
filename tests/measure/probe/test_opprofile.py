"""Per-operator correlation: op classes, the profiled step, the power join, the CSV."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from torch import nn

from fedbench.measure.opprofile import (
    OP_TABLE_CLASSES,
    OpInterval,
    ProfiledStep,
    classify_op,
    op_table,
    profile_step,
    write_op_table,
)
from fedbench.measure.probe.source import DEVICE
from fedbench.measure.probe.trace import ProbeTrace


@pytest.mark.parametrize(
    ("name", "shapes", "expected"),
    [
        ("aten::conv2d", [[8, 3, 32, 32], [16, 3, 3, 3]], "dense"),
        ("aten::conv2d", [[8, 16, 32, 32], [16, 1, 3, 3]], "depthwise"),
        (
            "aten::convolution_backward",
            [[8, 16, 32, 32], [8, 16, 32, 32], [16, 1, 3, 3]],
            "depthwise",
        ),
        ("aten::convolution_backward", [[8, 16, 32, 32], [8, 3, 32, 32], [16, 3, 3, 3]], "dense"),
        ("aten::conv2d", [[8, 1, 28, 28], [6, 1, 5, 5]], "dense"),  # one input channel
        ("aten::linear", [], "dense"),
        ("aten::addmm", [], "dense"),
        ("aten::mm", [], "dense"),
        ("aten::batch_norm", [], "elementwise"),
        ("aten::native_batch_norm_backward", [], "elementwise"),
        ("aten::relu_", [], "elementwise"),
        ("aten::threshold_backward", [], "elementwise"),
        ("aten::max_pool2d", [], "elementwise"),
        ("aten::cross_entropy_loss", [], "elementwise"),
        ("aten::_foreach_add_", [], "elementwise"),
        ("aten::add_", [], "elementwise"),
        ("aten::cat", [], "movement"),
        ("aten::copy_", [], "movement"),
        ("aten::constant_pad_nd", [], "movement"),
        ("aten::zero_", [], "movement"),
        ("aten::view", [], "other"),
        ("aten::t", [], "other"),
        ("aten::empty_strided", [], "other"),
        ("aten::some_future_op", [], "other"),
    ],
)
def test_classify_op(name: str, shapes: list[list[int]], expected: str) -> None:
    assert classify_op(name, shapes) == expected


def tiny_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU(),
        nn.Conv2d(16, 32, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip


def test_profile_step_on_a_tiny_cnn(tmp_path: Path) -> None:
    rows = profile_step(tiny_cnn(), (3, 16, 16), 8, warmup_steps=1)
    classes = {r.name: r for r in rows if r.level == "class"}
    ops = [r for r in rows if r.level == "op"]
    assert {"dense", "depthwise", "elementwise", "untracked"} <= set(classes)
    assert set(classes) <= set(OP_TABLE_CLASSES)
    assert sum(r.share for r in classes.values()) == pytest.approx(1.0, abs=0.02)
    tracked = sum(r.share for r in ops)
    assert 0.05 < tracked <= 1.0 + 1e-6
    # Convolutions ran forward and backward; the update is in the optimizer phase.
    dense = classes["dense"]
    assert dense.forward_s > 0 and dense.backward_s > 0
    assert classes["depthwise"].count == 2  # one forward conv2d, one convolution_backward
    assert classes["elementwise"].optimizer_s > 0
    kinds = {(r.name, r.op_class) for r in ops}
    assert {("aten::conv2d", "dense"), ("aten::conv2d", "depthwise")} <= kinds
    assert ("aten::convolution_backward", "depthwise") in kinds
    for r in rows:
        assert r.forward_s + r.backward_s + r.optimizer_s <= r.time_s + 1e-9
    # No power sensor on the test host -> NaN energy, never 0.
    path = tmp_path / "ops.csv"
    write_op_table(rows, path)
    with open(path) as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows)
    assert table[0]["level"] == "class"
    assert all(row["energy_j"] == "" for row in table) == all(math.isnan(r.energy_j) for r in rows)


def test_power_join_integrates_over_each_op() -> None:
    # Samples every 10 ms; power ramps 5 W -> 15 W over the 100 ms step.
    t = np.round(np.arange(0.0, 0.1001, 0.01), 6)
    trace = ProbeTrace(0.01, {"ina3221": "W", "cpu_util": "frac"}, {"ina3221": DEVICE}, {})
    for ti in t:
        trace.record(float(ti), {"ina3221": 5.0 + 100.0 * float(ti), "cpu_util": 0.5})
    ops = (
        OpInterval("aten::conv2d", "dense", "forward", 0.010, 0.040),
        OpInterval("aten::relu", "elementwise", "forward", 0.0412, 0.0418),  # inside one sample
        OpInterval("aten::convolution_backward", "dense", "backward", 0.050, 0.090),
    )
    step = ProfiledStep(ops, (("forward", 0.0, 0.045), ("backward", 0.045, 0.1)), 0.0, 0.1)
    rows = {(r.level, r.name): r for r in op_table(step, trace)}

    def power(x: float) -> float:
        return 5.0 + 100.0 * x

    relu = rows[("op", "aten::relu")]
    assert relu.energy_j == pytest.approx(power(0.0415) * 0.0006)  # interpolated power
    conv = rows[("op", "aten::conv2d")]
    assert conv.energy_j == pytest.approx(0.03 * power(0.025))
    dense = rows[("class", "dense")]
    assert dense.count == 2 and dense.time_s == pytest.approx(0.07)
    assert dense.forward_s == pytest.approx(0.03) and dense.backward_s == pytest.approx(0.04)
    assert dense.energy_j == pytest.approx(0.03 * power(0.025) + 0.04 * power(0.07))
    assert dense.cpu_util == pytest.approx(0.5)
    untracked = rows[("class", "untracked")]
    assert untracked.time_s == pytest.approx(0.1 - 0.07 - 0.0006)
    # The whole step's energy is split between the ops and the untracked time.
    total = sum(r.energy_j for r in rows.values() if r.level == "class")
    assert total == pytest.approx(trace.energy_j(0.0, 0.1))
    assert sum(r.share for (level, _), r in rows.items() if level == "class") == pytest.approx(1.0)
