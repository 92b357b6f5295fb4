"""The sampler thread: on this host, on a fixture tree, and with scripted sources."""

from __future__ import annotations

import math
import mmap
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from fedbench.errors import FedbenchError
from fedbench.measure.probe import DEVICE, PowerSource, Probe

FIXTURES = Path(__file__).parent / "fixtures"


def busy(seconds: float) -> None:
    """Keep one core busy in torch kernels (which release the GIL)."""
    a = torch.randn(128, 128)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)


def test_sampler_on_this_host() -> None:
    with Probe(interval_s=0.01) as trace:
        busy(0.15)
        # 64 MB of fresh pages, written so they become resident: an anonymous
        # mmap, because a torch tensor may reuse memory the allocator already
        # holds from earlier tests and then RSS need not grow.
        block = mmap.mmap(-1, 64 * 2**20)
        for offset in range(0, len(block), mmap.PAGESIZE):
            block[offset] = 1
        busy(0.15)
        block.close()
    sources = trace.sources()
    print(f"\nprobe sources on this host: {sources}")
    print(f"absent: {sorted(set(_all_names()) - set(sources))}")
    for required in ("cpu_util", "process_mem", "mem_available"):
        assert required in sources
    t = trace.t
    assert len(trace) >= 6
    assert np.median(np.diff(t)) < 0.05
    assert 0.0 < trace.cpu_util_avg() <= 1.0
    assert trace.peak_rss_mb() - trace.rss_mb() >= 60.0  # the 64 MB block
    assert trace.mem_available_mb() > 0
    # Figures of sensors the host lacks are NaN, present ones are numbers.
    has_power = bool(trace.power_scopes)
    assert math.isnan(trace.energy_j()) != has_power
    has_temp = any(unit == "C" for unit in trace.units.values())
    assert math.isnan(trace.temp_start()) != has_temp
    has_freq = "cpu_freq" in sources
    assert math.isnan(trace.freq_ghz_avg()) != has_freq


def _all_names() -> list[str]:
    from fedbench.measure.probe import default_sources

    return [s.name for s in default_sources(FIXTURES / "rapl_server")]


def test_sampler_on_a_jetson_tree() -> None:
    with Probe(interval_s=0.005, root=FIXTURES / "jetson_tx2") as trace:
        time.sleep(0.1)
    assert set(trace.sources()) == {
        "cpu_util", "cpu_freq", "process_mem", "mem_available", "thermal", "ina3221",
    }  # fmt: skip
    t0, t1 = trace.window()
    assert trace.energy_j() == pytest.approx(7.466 * (t1 - t0))
    assert trace.avg_power_w() == pytest.approx(7.466)
    assert trace.series("ina3221/VDD_SYS_CPU")[-1] == pytest.approx(3.363)
    assert trace.temp_start() == pytest.approx(47.5)
    assert trace.mem_available_mb() == pytest.approx(6273860 / 1024)
    # No utilisation (the recorded /proc/stat never moves), so all cores count:
    # four at max and two Denver cores 30% below average 90% of max -> throttled.
    assert trace.throttled_frac() == 1.0
    assert trace.freq_ghz_avg() == pytest.approx((4 * 2.0352 + 2 * 1.4208) / 6)
    assert math.isnan(trace.cpu_util_avg())  # the recorded /proc/stat never moves


class ScriptedPower(PowerSource):
    name: ClassVar[str] = "scripted"
    scope = DEVICE

    def __init__(self) -> None:
        self.calls = {"start": 0, "close": 0, "read": 0}

    def available(self) -> bool:
        return True

    def start(self) -> None:
        self.calls["start"] += 1

    def read(self) -> float | None:
        self.calls["read"] += 1
        return 2.5

    def close(self) -> None:
        self.calls["close"] += 1


def test_sampler_lifecycle_with_a_scripted_source() -> None:
    source = ScriptedPower()
    probe = Probe(interval_s=0.01, sources=[source])
    trace = probe.start()
    trace.mark("step0")
    time.sleep(0.05)
    trace.mark("step1")
    time.sleep(0.05)
    assert probe.stop() is trace
    assert source.calls["start"] == source.calls["close"] == 1
    assert source.calls["read"] == len(trace) >= 3
    assert trace.energy_j(*trace.after_warmup(1)) == pytest.approx(
        2.5 * (trace.t[-1] - trace.marks[1][0])
    )
    with pytest.raises(RuntimeError, match="not running"):
        probe.stop()


def test_interval_must_be_positive() -> None:
    with pytest.raises(FedbenchError, match="interval_s=0"):
        Probe(interval_s=0)


class FlakySource(ScriptedPower):
    name: ClassVar[str] = "flaky"

    def read(self) -> float | None:
        self.calls["read"] += 1
        if self.calls["read"] % 2 == 0:
            raise OSError("No such device")  # a hot-unplugged sensor
        return 1.0


def test_a_failing_read_misses_the_sample_not_the_run() -> None:
    source = FlakySource()
    with Probe(interval_s=0.005, sources=[source]) as trace:
        time.sleep(0.06)
    values = trace.series("flaky")
    assert len(values) >= 4
    assert np.isnan(values).any() and (values == 1.0).any()
