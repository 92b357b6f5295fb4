"""ProbeTrace summaries on synthetic traces: energy, CPU, throttling, warm-up, memory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbench.measure.probe.series import integrate, interval_mean, merge, value_at
from fedbench.measure.probe.source import COMPONENT, DEVICE
from fedbench.measure.probe.trace import ProbeTrace


def make_trace(
    t: list[float],
    columns: dict[str, list[float]],
    units: dict[str, str] | None = None,
    scopes: dict[str, str] | None = None,
    static: dict[str, float] | None = None,
) -> ProbeTrace:
    trace = ProbeTrace(0.01, units or {}, scopes or {}, static or {})
    for i, ti in enumerate(t):
        trace.record(ti, {k: v[i] for k, v in columns.items() if not math.isnan(v[i])})
    return trace


def test_series_helpers() -> None:
    t = np.array([0.0, 1.0, 2.0, 3.0])
    ramp = np.array([0.0, 1.0, 2.0, 3.0])
    assert integrate(t, ramp, 0.0, 3.0) == pytest.approx(4.5)
    assert integrate(t, ramp, 0.5, 0.7) == pytest.approx(0.6 * 0.2)  # inside one interval
    gaps = np.array([0.0, math.nan, 2.0, 3.0])
    assert value_at(t, gaps, 1.0) == pytest.approx(1.0)
    assert math.isnan(integrate(t, np.full(4, math.nan), 0.0, 3.0))
    util = np.array([math.nan, 1.0, 0.0, 0.5])  # per interval (t[i-1], t[i]]
    assert interval_mean(t, util, 0.5, 2.0) == pytest.approx((0.5 * 1.0 + 1.0 * 0.0) / 1.5)
    assert merge([(2.0, 3.0), (0.0, 1.0), (0.5, 1.5)]) == [(0.0, 1.5), (2.0, 3.0)]


def test_energy_trapezoid_matches_analytic_integral() -> None:
    # Power rises linearly 2 W -> 6 W over 2 s, sampled every 10 ms.
    t = list(np.arange(0.0, 2.0 + 1e-9, 0.01))
    power = [2.0 + 2.0 * x for x in t]
    trace = make_trace(t, {"ina3221": power}, {"ina3221": "W"}, {"ina3221": DEVICE})
    assert trace.energy_j() == pytest.approx(8.0)
    assert trace.energy_j(0.5, 1.5) == pytest.approx(4.0)
    assert trace.avg_power_w(0.5, 1.5) == pytest.approx(4.0)
    assert trace.sources() == ["ina3221"]


def test_counter_is_preferred_over_sampled_power() -> None:
    # Sampled power misses a spike the counter saw: the counter wins.
    t = [0.0, 1.0, 2.0]
    trace = make_trace(
        t,
        {"rapl": [math.nan, 10.0, 10.0], "rapl.energy_j": [0.0, 10.0, 50.0]},
        {"rapl": "W"},
        {"rapl": COMPONENT},
    )
    assert trace.energy_j() == pytest.approx(50.0)
    assert trace.energy_j(0.5, 1.5) == pytest.approx(30.0 - 5.0)  # counter interpolated


def test_device_source_wins_and_components_add_up() -> None:
    t = [0.0, 1.0, 2.0]
    columns = {"battery": [5.0] * 3, "rapl": [3.0] * 3, "nvml": [1.5] * 3}
    units = dict.fromkeys(columns, "W")
    with_battery = make_trace(
        t, columns, units, {"battery": DEVICE, "rapl": COMPONENT, "nvml": COMPONENT}
    )
    assert with_battery.total_power_sources() == ["battery"]
    assert with_battery.energy_j() == pytest.approx(10.0)
    assert with_battery.energy_j(source="rapl") == pytest.approx(6.0)
    components = make_trace(t, columns, units, {"rapl": COMPONENT, "nvml": COMPONENT})
    assert components.energy_j() == pytest.approx(9.0)
    assert np.allclose(components.power_series()[1], 4.5)


def test_missing_power_is_nan_not_zero() -> None:
    trace = make_trace([0.0, 1.0], {"process_mem": [100.0, 120.0]}, {"process_mem": "MB"})
    assert math.isnan(trace.energy_j())
    assert math.isnan(trace.avg_power_w())
    assert math.isnan(trace.temp_start())
    assert math.isnan(trace.freq_ghz_avg())
    assert math.isnan(trace.throttled_frac())
    assert math.isnan(trace.cpu_util_avg())
    assert math.isnan(trace.battery_pct())


def _cpu_trace(freqs: dict[str, list[float]], busy_per_sample: dict[str, int]) -> ProbeTrace:
    n = len(next(iter(freqs.values())))
    t = [0.1 * i for i in range(n)]
    columns: dict[str, list[float]] = {}
    for core, f in freqs.items():
        columns[f"cpu_freq/{core}"] = f
        # 10 ticks per interval, `busy` of them busy
        columns[f"cpu_util/busy:{core}"] = [float(busy_per_sample[core] * i) for i in range(n)]
        columns[f"cpu_util/total:{core}"] = [10.0 * i for i in range(n)]
    static = {f"cpu_freq/max:{core}": 2.0 for core in freqs}
    return make_trace(t, columns, {"cpu_util": "frac", "cpu_freq": "GHz"}, {}, static)


def test_throttled_frac_and_util_weighted_frequency() -> None:
    # cpu0 trains (9/10 busy) and is capped to 1.5 GHz in 2 of 5 samples;
    # cpu1 idles at 0.5 GHz, which is the governor's choice, not throttling.
    trace = _cpu_trace(
        {"cpu0": [2.0, 2.0, 1.5, 1.5, 1.95], "cpu1": [0.5] * 5}, {"cpu0": 9, "cpu1": 1}
    )
    assert trace.core_util() == pytest.approx({"cpu0": 0.9, "cpu1": 0.1})
    assert trace.cpu_util_avg() == pytest.approx(0.5)
    assert trace.throttled_frac() == pytest.approx(2 / 5)
    f0, f1 = np.mean([2.0, 2.0, 1.5, 1.5, 1.95]), 0.5
    assert trace.freq_ghz_avg() == pytest.approx((0.9 * f0 + 0.1 * f1) / 1.0)


def test_throttled_frac_counts_all_cores_when_none_is_busy() -> None:
    trace = _cpu_trace({"cpu0": [1.0, 2.0, 2.0, 2.0], "cpu1": [2.0] * 4}, {"cpu0": 0, "cpu1": 0})
    # Sample 0: mean ratio 0.75 -> throttled; the rest at max.
    assert trace.throttled_frac() == pytest.approx(1 / 4)


def test_warmup_exclusion_by_step_marks() -> None:
    # Five steps of 1 s; the first three draw 10 W (warm-up), the rest 4 W.
    t = [0.1 * i for i in range(51)]
    power = [10.0 if x < 3.0 else 4.0 for x in t]
    trace = make_trace(t, {"battery": power}, {"battery": "W"}, {"battery": DEVICE})
    for step in range(5):
        trace.mark(f"step{step}", t=float(step))
    assert [label for label, _, _ in trace.steps()] == [f"step{i}" for i in range(5)]
    assert trace.steps()[-1][1:] == (4.0, 5.0)
    t0, t1 = trace.after_warmup(3)
    assert (t0, t1) == (3.0, 5.0)
    assert trace.avg_power_w(t0, t1) == pytest.approx(4.0)
    assert trace.avg_power_w() > 6.0  # the warm-up is in the whole-trace figure
    with pytest.raises(ValueError, match="5 steps were marked"):
        trace.after_warmup(5)


def test_temperature_edges_take_the_hottest_sensor() -> None:
    t = [0.0, 1.0, 2.0]
    trace = make_trace(
        t,
        {
            "thermal": [40.0, 45.0, 50.0],
            "thermal/thermal_zone0:cpu": [40.0, 45.0, 50.0],
            "hwmon_temp": [math.nan, 47.0, 48.0],
        },
        {"thermal": "C", "hwmon_temp": "C"},
    )
    assert trace.temp_start() == 40.0
    assert trace.temp_end() == 50.0
    assert trace.temp_start(0.5, 2.0) == 47.0
    assert trace.temp_end(key="hwmon_temp") == 48.0


def test_peak_rss_uses_kernel_peak_that_rose_in_the_window() -> None:
    t = [0.0, 1.0, 2.0, 3.0]
    trace = make_trace(
        t,
        {
            "process_mem": [100.0, 150.0, 120.0, 110.0],
            "process_mem/hwm": [100.0, 150.0, 400.0, 400.0],
        },
        {"process_mem": "MB"},
    )
    # A 400 MB spike between samples 1 and 2 is only in VmHWM.
    assert trace.peak_rss_mb() == 400.0
    # After the spike the peak no longer rises: sampled RSS only.
    assert trace.peak_rss_mb(2.5, 3.0) == 110.0
    assert trace.rss_mb() == 100.0
