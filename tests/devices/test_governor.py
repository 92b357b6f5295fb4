"""The default governor's load-driven clocks (fedbench.devices.cpu.load_clocks)."""

from __future__ import annotations

import dataclasses

import pytest

from fedbench.core.workload import Workload
from fedbench.devices.constants import load_constants
from fedbench.devices.cpu import SCHEDUTIL_BUSY_SHARE, load_clocks, main_thread, place
from fedbench.devices.emulator import emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import initial_state, load_profile
from fedbench.devices.step import step_cost
from tests.devices.synthetic import synthetic_workload

CONSTS = load_constants()
# Enough busy time for 1 s of host work: schedutil's steady state.
SETTLED = SCHEDUTIL_BUSY_SHARE / (1.0 - SCHEDUTIL_BUSY_SHARE)


def test_a_worker_cluster_slows_until_it_is_busy_the_governors_share() -> None:
    meizu = load_profile("meizu_16t")  # prime (main thread) + 3 gold workers, "sustained"
    active = place(meizu, Knobs(), CONSTS, None)
    main = main_thread(active, CONSTS)
    assert [a.cluster.name for a in active] == ["prime", "gold"] and main.cluster.name == "prime"
    settled = load_clocks(active, main, busy_s=SETTLED / 2, idle_s=1.0)
    prime, gold = settled
    assert prime == active[0]  # the main thread's cluster is busy the whole step
    assert gold.freq_ghz == pytest.approx(active[1].freq_ghz / 2)
    assert gold.threads == active[1].threads
    # Busy enough already: nothing moves; and never below the lowest DVFS step.
    assert load_clocks(active, main, busy_s=SETTLED, idle_s=1.0) == active
    floor = load_clocks(active, main, busy_s=1e-6, idle_s=1.0)[1]
    assert floor.freq_ghz == gold.cluster.dvfs_ghz[0]


@pytest.mark.parametrize(
    ("device", "knobs"),
    [
        ("meizu_16t", Knobs(freq_ghz=1.7088)),  # a clock knob: the userspace governor
        ("rpi4", Knobs()),  # a board's governor runs busy clusters at the top step
    ],
)
def test_a_clock_the_governor_does_not_drive_stays(device: str, knobs: Knobs) -> None:
    profile = load_profile(device)
    active = place(profile, knobs, CONSTS, None)
    assert not any(a.governed for a in active)
    assert load_clocks(active, main_thread(active, CONSTS), 1e-6, 1.0) == active


def _tiny() -> Workload:
    # Milliseconds of calls against the framework's per-call and per-step host work.
    return synthetic_workload(
        1, gflop_per_sample=1e-4, act_mb_per_sample=0.01, params_m=0.01, input_shape=(1, 8, 8)
    )


def test_a_host_bound_step_runs_its_workers_slower_and_cooler() -> None:
    meizu = load_profile("meizu_16t")
    idle = initial_state(meizu, 0.0)
    placed = place(meizu, Knobs(), CONSTS, None)
    placed_ghz = sum(a.freq_ghz * a.threads for a in placed) / sum(a.threads for a in placed)
    big = emulate(meizu, [(synthetic_workload(8), 1)], idle, Knobs())
    tiny = emulate(meizu, [(_tiny(), 1)], idle, Knobs())
    assert big.freq_ghz_avg == pytest.approx(placed_ghz)
    assert tiny.freq_ghz_avg < 0.8 * placed_ghz
    # The same step at the same starting clocks with nothing load-driven: faster,
    # and it draws more. The governor trades one for the other.
    tiny_w = _tiny()
    held = tuple(dataclasses.replace(a, governed=False) for a in placed)
    on, off = (
        step_cost(meizu, tiny_w, active, CONSTS, "mnn", background=False)
        for active in (placed, held)
    )
    assert off.seconds < on.seconds
    assert off.active_power_w > on.active_power_w
    assert on.freq_ghz == pytest.approx(tiny.freq_ghz_avg)
