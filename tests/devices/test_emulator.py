"""The emulator: deterministic, and it reproduces the papers' qualitative facts."""

from __future__ import annotations

import dataclasses
import math

import pytest

from fedbench.core.device import DeviceState
from fedbench.devices.emulator import Emulation, emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.network import comm_time_s, is_available
from fedbench.devices.profile import DeviceProfile, initial_state, load_profile
from fedbench.devices.thermal import cool
from fedbench.errors import FedbenchError
from tests.devices.synthetic import synthetic_workload

DEFAULT_KNOBS = Knobs()


def run(
    name: str | DeviceProfile,
    batch: int = 8,
    steps: int = 1,
    knobs: Knobs = DEFAULT_KNOBS,
    state: DeviceState | None = None,
) -> Emulation:
    p = load_profile(name) if isinstance(name, str) else name
    return emulate(p, [(synthetic_workload(batch), steps)], state or initial_state(p, 0.0), knobs)


def above_idle_j(e: Emulation) -> float:
    return e.energy_j - e.energy_terms_j["idle"]


def test_deterministic_and_complete() -> None:
    a, b = run("meizu_16t", steps=50), run("meizu_16t", steps=50)
    assert a == b
    assert a.status == "ok"
    for value in (a.latency_s, a.energy_j, a.avg_power_w, a.peak_mem_mb, a.freq_ghz_avg):
        assert math.isfinite(value) and value > 0
    assert sum(a.time_s.values()) == pytest.approx(a.latency_s)
    assert sum(a.energy_terms_j.values()) == pytest.approx(a.energy_j)
    assert a.avg_power_w == pytest.approx(a.energy_j / a.latency_s)
    assert a.state.time_s == pytest.approx(a.latency_s)


@pytest.mark.parametrize("device", ["meizu_16t", "rpi4", "jetson_tx2"])
def test_larger_batch_raises_throughput(device: str) -> None:
    # Class totals (no per-call table): only the per-step costs amortise;
    # the per-call mechanisms are tested on real models in test_paper_facts.
    rates = [b / run(device, batch=b).latency_s for b in (1, 4, 16, 64)]
    assert rates == sorted(rates) and rates[-1] > 1.05 * rates[0]


def test_repeated_training_heats_and_slows() -> None:
    # The S8 Plus's default governor holds the top step until a thermal trip
    # (the Meizu's settles below its first trip's cap: test_paper_facts).
    p = load_profile("samsung_s8plus")
    # 1000 steps (~27 min) from cold stay below the first trip; from hot
    # (after 3000 steps) they cross it.
    first = run(p, steps=1000)
    later = run(p, steps=1000, state=run(p, steps=3000).state)
    assert later.temp_c_start > first.temp_c_start
    assert later.throttled_frac > 0 and first.throttled_frac == 0
    assert later.latency_s > 1.1 * first.latency_s
    assert later.freq_ghz_avg < first.freq_ghz_avg


def test_idle_cooling_restores_speed() -> None:
    p = load_profile("meizu_16t")
    hot = run(p, steps=3000).state
    cooled = cool(p, hot, hot.time_s + 3600.0)
    assert p.thermal.ambient_c < cooled.temp_c < hot.temp_c
    assert cool(p, hot, hot.time_s).temp_c == hot.temp_c
    assert cool(p, hot, hot.time_s + 1e6).temp_c == pytest.approx(p.thermal.ambient_c)
    assert run(p, steps=200, state=cooled).latency_s < run(p, steps=200, state=hot).latency_s


def test_thermal_integration_does_not_depend_on_chunking() -> None:
    p = load_profile("rpi4")
    whole = run(p, steps=400)
    half = run(p, steps=200)
    rest = run(p, steps=200, state=half.state)
    assert half.latency_s + rest.latency_s == pytest.approx(whole.latency_s, rel=0.02)
    assert rest.temp_c_end == pytest.approx(whole.temp_c_end, abs=1.0)


def test_background_is_about_three_times_slower() -> None:
    fg = run("pixel2")
    bg = run("pixel2", knobs=Knobs(background=True))
    assert 2.5 < bg.latency_s / fg.latency_s < 3.5
    assert above_idle_j(bg) == pytest.approx(above_idle_j(fg), rel=0.05)


def test_oom_when_over_the_training_budget() -> None:
    p = load_profile("rpi3bplus")
    small = dataclasses.replace(p, memory=dataclasses.replace(p.memory, train_budget_mb=64))
    e = run(small, batch=8)
    assert e.status == "oom" and "budget" in e.reason
    assert math.isnan(e.latency_s) and e.peak_mem_mb > 64
    assert e.state == initial_state(p, 0.0)
    assert run(p, batch=2).status == "ok"


def test_battery_drains_on_phones_only() -> None:
    phone = run("meizu_16t", steps=100)
    assert phone.battery_pct < 100.0
    capacity = load_profile("meizu_16t").battery.capacity_wh
    assert capacity is not None
    drained = 100.0 * phone.energy_j / (capacity * 3600.0)
    assert 100.0 - phone.battery_pct == pytest.approx(drained)
    assert run("rpi4", steps=100).battery_pct == 100.0
    low = DeviceState(temp_c=30.0, battery_pct=0.01, time_s=0.0)
    assert run("meizu_16t", steps=100, state=low).status == "dropped"


def test_frequency_cap_slows_compute() -> None:
    fast = run("meizu_16t")
    capped = run("meizu_16t", knobs=Knobs(freq_ghz=1.0))
    assert capped.latency_s > 1.3 * fast.latency_s
    assert capped.freq_ghz_avg < 1.0


def test_network_and_availability() -> None:
    phone, board = load_profile("meizu_16t"), load_profile("rpi4")
    assert is_available(phone, 23 * 3600.0) and is_available(phone, 86400.0 + 3 * 3600.0)
    assert not is_available(phone, 12 * 3600.0)
    assert all(is_available(board, h * 3600.0) for h in range(24))
    model_bytes = 10_000_000
    expected = 8e7 / 60e6 + 8e7 / 20e6 + 2 * 0.030
    assert comm_time_s(phone, model_bytes) == pytest.approx(expected)
    assert comm_time_s(board, model_bytes) < comm_time_s(phone, model_bytes)


def test_bad_knobs_are_refused_with_choices() -> None:
    with pytest.raises(FedbenchError, match="valid: gold, prime, silver"):
        run("meizu_16t", knobs=Knobs(clusters=("big",)))
    with pytest.raises(FedbenchError, match="has 4 cores"):
        run("rpi4", knobs=Knobs(cores=8))
    with pytest.raises(FedbenchError, match="valid: mnn, pytorch"):
        run("rpi4", knobs=Knobs(framework="tflite"))
    with pytest.raises(FedbenchError, match="did you mean 'cores'"):
        Knobs.from_mapping({"core": 2})
    with pytest.raises(FedbenchError, match="not MHz"):
        Knobs.from_mapping({"freq_ghz": 1700})
    assert Knobs.from_mapping({"cores": "2", "clusters": "gold,prime", "background": "true"}) == (
        Knobs(cores=2, clusters=("gold", "prime"), background=True)
    )
