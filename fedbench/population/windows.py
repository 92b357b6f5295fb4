"""Each device's availability as periodic windows, and its battery over the virtual clock.

A device's pattern repeats every `period_s` of its own (a drawn population:
one day; a trace: the trace's length, as FedScale replays its traces). A
window is a [start, end) phase within the period, with a flag saying
whether the device charges during it; windows that wrap past the period's
end are stored as two. Everything is flat numpy arrays, one row per window,
so a 100,000-device fleet is answered in a few vectorised passes.

Battery: a device gains `charge_w` while in a charging window and loses
`idle_w` otherwise (the owner's own use and standby), clipped to [0, 100] %.
`advance` integrates that exactly, edge to edge, so a battery that fills at
3 am and drains all day ends the day where it should, not where the
net balance of the interval would put it. Training and communication drain
it by their energy separately (the device's meter; fedbench.population.meter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DAY_S = 86_400.0
_EPS_S = 1e-6  # an edge closer than this to the target time is the target


@dataclass(frozen=True, eq=False)
class Windows:
    """Flat window rows plus each device's period; `described[i]` False: no windows known."""

    n: int
    device: np.ndarray  # int64 per window
    start_s: np.ndarray  # phase in [0, period)
    end_s: np.ndarray  # start < end <= period
    charging: np.ndarray  # bool per window
    period_s: np.ndarray  # float per device
    described: np.ndarray  # bool per device

    def __post_init__(self) -> None:
        # Rows are sorted by device: each device's rows start at `first` (next_edge).
        owners, first = np.unique(self.device, return_index=True)
        object.__setattr__(self, "_owners", owners)
        object.__setattr__(self, "_first", first)

    @classmethod
    def build(
        cls,
        n: int,
        device: np.ndarray,
        start_s: np.ndarray,
        length_s: np.ndarray,
        charging: np.ndarray,
        period_s: np.ndarray,
        described: np.ndarray,
    ) -> Windows:
        """Windows from (device, start phase, length): wrapping ones split in two."""
        device = np.asarray(device, dtype=np.int64)
        period = np.asarray(period_s, dtype=float)[device]
        length = np.minimum(np.asarray(length_s, dtype=float), period)
        start = np.mod(np.asarray(start_s, dtype=float), period)
        keep = length > 0
        device, start, length, period = device[keep], start[keep], length[keep], period[keep]
        charging = np.asarray(charging, dtype=bool)[keep]
        end = start + length
        wraps = end > period
        head_end = np.where(wraps, period, end)
        devs = np.concatenate([device, device[wraps]])
        starts = np.concatenate([start, np.zeros(int(wraps.sum()))])
        ends = np.concatenate([head_end, end[wraps] - period[wraps]])
        charges = np.concatenate([charging, charging[wraps]])
        order = np.argsort(devs, kind="stable")
        return cls(
            n,
            devs[order],
            starts[order],
            ends[order],
            charges[order],
            np.asarray(period_s, dtype=float),
            np.asarray(described, dtype=bool),
        )

    def _phase(self, t_s: float | np.ndarray) -> np.ndarray:
        """Each window's phase at time t (a scalar, or one time per device)."""
        t = np.broadcast_to(np.asarray(t_s, dtype=float), (self.n,))[self.device]
        return np.mod(t, self.period_s[self.device])

    def _any(self, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        out[self.device[rows]] = True
        return out

    def inside(self, t_s: float | np.ndarray) -> np.ndarray:
        """Per device: inside any of its windows at t (undescribed devices: False)."""
        phase = self._phase(t_s)
        return self._any((self.start_s <= phase) & (phase < self.end_s))

    def device_inside(self, i: int, t_s: float) -> bool:
        """`inside(t)[i]` for one device, without touching the others' rows."""
        lo, hi = np.searchsorted(self.device, [i, i + 1])
        phase = t_s % self.period_s[i]
        return bool(np.any((self.start_s[lo:hi] <= phase) & (phase < self.end_s[lo:hi])))

    def charging_at(self, t_s: float | np.ndarray) -> np.ndarray:
        phase = self._phase(t_s)
        return self._any((self.start_s <= phase) & (phase < self.end_s) & self.charging)

    def next_edge(self, t_s: np.ndarray) -> np.ndarray:
        """Per device: the first window edge strictly after its time t (inf: no windows)."""
        phase = self._phase(t_s)
        period = self.period_s[self.device]
        ahead = []
        for edge in (self.start_s, self.end_s):
            gap = np.mod(edge - phase, period)
            ahead.append(np.where(gap <= _EPS_S, period, gap))
        gap = np.minimum(ahead[0], ahead[1])
        out = np.full(self.n, np.inf)
        if len(gap):  # rows are sorted by device: one reduceat over each device's rows
            out[self._owners] = np.minimum.reduceat(gap, self._first)  # type: ignore[attr-defined]
        return np.broadcast_to(np.asarray(t_s, dtype=float), (self.n,)) + out

    def hours_per_day(self, charging: bool | None = None) -> np.ndarray:
        """Per device: hours a day inside its windows (all, or only charging / on battery)."""
        rows = np.ones(len(self.device), dtype=bool)
        if charging is not None:
            rows = self.charging == charging
        seconds = np.bincount(
            self.device[rows], weights=(self.end_s - self.start_s)[rows], minlength=self.n
        )
        return seconds / self.period_s * 24.0


def advance(
    level_pct: np.ndarray,
    t0_s: np.ndarray,
    t1_s: float,
    windows: Windows,
    idle_w: np.ndarray,
    charge_w: np.ndarray,
    capacity_wh: np.ndarray,
) -> np.ndarray:
    """Battery levels at t1 from levels at t0 (per device), charging and idling between.

    Devices whose level or time is NaN (no battery, never started) are left as they are.
    """
    level = np.array(level_pct, dtype=float)
    t = np.array(t0_s, dtype=float)
    live = ~np.isnan(level) & ~np.isnan(t) & (t < t1_s) & (capacity_wh > 0)
    pct_per_s = 100.0 / (np.where(capacity_wh > 0, capacity_wh, np.nan) * 3600.0)
    while live.any():
        edge = np.minimum(windows.next_edge(np.where(live, t, t1_s)), t1_s)
        charging = windows.charging_at(t)
        rate = np.where(charging, charge_w, -idle_w) * pct_per_s
        step = np.where(live, edge - t, 0.0)
        level = np.where(live, np.clip(level + rate * step, 0.0, 100.0), level)
        t = np.where(live, edge, t)
        live &= t < t1_s - _EPS_S
    return level


def charging_seconds(windows: Windows, t0_s: float, t1_s: float) -> np.ndarray:
    """Per device: seconds in [t0, t1) spent in charging windows (describes traces, tests)."""

    def cumulative(t: float) -> np.ndarray:
        period = windows.period_s[windows.device]
        cycles = np.floor(t / period)
        phase = t - cycles * period
        rows = cycles * (windows.end_s - windows.start_s) + np.clip(
            phase - windows.start_s, 0.0, windows.end_s - windows.start_s
        )
        return np.bincount(
            windows.device, weights=np.where(windows.charging, rows, 0.0), minlength=windows.n
        )

    return cumulative(t1_s) - cumulative(t0_s)
