"""The probe: a background thread sampling every available source.

    with Probe(interval_s=0.01) as trace:
        for step in ...:
            trace.mark("step")
            train_step()
    trace.energy_j(*trace.after_warmup(3))

`Probe.start()` asks every source whether the device has it, keeps those
that say yes, takes a first sample at once (so the window's start and
counters' baselines are inside the trace) and starts the thread; `stop()`
takes a last sample and returns the same trace. The thread sleeps to a
fixed schedule (start + k x interval); when a sample overruns, it skips to
the next slot instead of bursting to catch up. Timestamps are
time.perf_counter() taken just before a sample's reads.

Sampling costs CPU on the device measured: on the 2-core test host one
sample of the sources present takes a few hundred microseconds, a few
percent of one core at the default 10 ms (paper 000 chose 10 ms for the
same trade-off).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from fedbench.errors import FedbenchError
from fedbench.measure.probe.battery import BatteryLevelSource, BatterySource
from fedbench.measure.probe.cpu import CpuFreqSource, ProcStatSource
from fedbench.measure.probe.ina3221 import Ina3221HwmonSource, Ina3221IioSource
from fedbench.measure.probe.memory import ProcessMemorySource, SystemMemorySource
from fedbench.measure.probe.nvml import NvmlSource
from fedbench.measure.probe.rapl import RaplSource
from fedbench.measure.probe.source import PowerSource, Source
from fedbench.measure.probe.thermal import HwmonTempSource, ThermalZoneSource
from fedbench.measure.probe.trace import ENERGY_SUFFIX, ProbeTrace

# Every kind of source, in sampling order. Power sources come in priority
# order for the device total: whole-device rails before the battery, so a
# Jetson on battery is measured by its input rail.
SOURCE_TYPES: tuple[Callable[[Path], Source], ...] = (
    ProcStatSource,
    CpuFreqSource,
    ProcessMemorySource,
    SystemMemorySource,
    ThermalZoneSource,
    HwmonTempSource,
    Ina3221IioSource,
    Ina3221HwmonSource,
    BatterySource,
    BatteryLevelSource,
    RaplSource,
    NvmlSource,
)


def default_sources(root: Path) -> list[Source]:
    """One instance of every source type, reading under `root`."""
    return [make(root) for make in SOURCE_TYPES]


def take_sample(sources: Sequence[Source]) -> dict[str, float]:
    """One reading of every source as trace keys (trace.py)."""
    values: dict[str, float] = {}
    for source in sources:
        try:
            value = source.read()
            channels = source.channels()
            energy = source.energy_j() if isinstance(source, PowerSource) else None
        except (OSError, ValueError):
            # A sensor that vanished or printed garbage (hot-unplug, a driver
            # mid-update) misses this sample; the thread must keep sampling.
            continue
        if value is not None:
            values[source.name] = value
        for channel, v in channels.items():
            values[f"{source.name}/{channel}"] = v
        if energy is not None:
            values[source.name + ENERGY_SUFFIX] = energy
    return values


def check_interval(interval_s: float) -> None:
    """Reject a sampling interval that is not a positive number of seconds."""
    if not interval_s > 0:
        raise FedbenchError(
            f"probe interval_s={interval_s!r} must be a positive number of seconds (default 0.01)"
        )


class Probe:
    """Samples the device's sensors on a background thread (module doc)."""

    def __init__(
        self,
        interval_s: float = 0.01,
        root: str | Path = "/",
        sources: Sequence[Source] | None = None,
    ) -> None:
        check_interval(interval_s)
        self.interval_s = interval_s
        self.root = Path(root)
        self._candidates = list(sources) if sources is not None else default_sources(self.root)
        self._active: list[Source] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._trace: ProbeTrace | None = None

    @property
    def trace(self) -> ProbeTrace:
        if self._trace is None:
            raise RuntimeError("the probe has not been started")
        return self._trace

    def start(self) -> ProbeTrace:
        if self._thread is not None:
            raise RuntimeError("the probe is already running")
        self._active = [s for s in self._candidates if s.available()]
        static: dict[str, float] = {}
        for source in self._active:
            source.start()
            static.update({f"{source.name}/{k}": v for k, v in source.static().items()})
        self._trace = ProbeTrace(
            self.interval_s,
            units={s.name: s.unit for s in self._active},
            power_scopes={s.name: s.scope for s in self._active if isinstance(s, PowerSource)},
            static=static,
        )
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fedbench-probe", daemon=True)
        self._thread.start()
        return self._trace

    def stop(self) -> ProbeTrace:
        if self._thread is None:
            raise RuntimeError("the probe is not running")
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()
        for source in self._active:
            source.close()
        return self.trace

    def _sample(self) -> None:
        t = time.perf_counter()
        self.trace.record(t, take_sample(self._active))

    def _run(self) -> None:
        next_t = time.perf_counter() + self.interval_s
        while not self._stop.wait(max(0.0, next_t - time.perf_counter())):
            self._sample()
            next_t += self.interval_s
            now = time.perf_counter()
            if next_t < now:  # overran: skip the missed slots
                next_t = now + self.interval_s

    def __enter__(self) -> ProbeTrace:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
